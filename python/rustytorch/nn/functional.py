"""nn.functional: the library's nn ops with PyTorch's signatures."""

from .. import _C

relu = _C.relu
silu = _C.silu
sigmoid = _C.sigmoid
tanh = _C.tanh
gelu = _C.gelu
leaky_relu = _C.leaky_relu
elu = _C.elu
softplus = _C.softplus
softmax = _C.softmax
log_softmax = _C.log_softmax
linear = _C.linear
conv2d = _C.conv2d
max_pool2d = _C.max_pool2d
avg_pool2d = _C.avg_pool2d
adaptive_avg_pool2d = _C.adaptive_avg_pool2d
layer_norm = _C.layer_norm
embedding = _C.embedding
cross_entropy = _C.cross_entropy
nll_loss = _C.nll_loss
mse_loss = _C.mse_loss
binary_cross_entropy_with_logits = _C.binary_cross_entropy_with_logits
one_hot = _C.one_hot
scaled_dot_product_attention = _C.scaled_dot_product_attention


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    out = _C.dropout(input, p, training)
    if inplace:
        input.copy_(out)
        return input
    return out


def relu_(input):
    return input.relu_()
