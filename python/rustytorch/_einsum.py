"""rustytorch.einsum: Einstein summation in every form torch.einsum accepts (explicit or implicit
output, '...', subscripts repeated within an operand, size-1 dims broadcasting, the sublist form).
It is reduced to diagonal, sum, permute, expand, reshape and bmm, so it is differentiable and runs
on every device. Operands are contracted left to right."""
import builtins

from . import _C

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _error(message):
    return _C.ValueError("[einsum] " + message)


def _sublist_term(sublist):
    """A sublist ([0, 1], [Ellipsis, 2]) as equation subscripts."""
    term = ""
    for item in sublist:
        if item is Ellipsis:
            term += "..."
        elif isinstance(item, int) and not isinstance(item, builtins.bool) and 0 <= item < len(_LETTERS):
            term += _LETTERS[item]
        else:
            raise _error(f"sublist subscripts must be Ellipsis or ints in [0, 52), got {item!r}")
    return term


def _equation_and_operands(args):
    """(equation, operands) from einsum(equation, *operands), einsum(equation, [operands]) or the
    sublist form einsum(op0, sublist0, op1, sublist1, ..., [output_sublist])."""
    if not args:
        raise TypeError("einsum(): expected an equation and operands")
    if isinstance(args[0], str):
        operands = args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = operands[0]
        return args[0], list(operands)
    pairs, rest = args[:len(args) // 2 * 2], args[len(args) // 2 * 2:]
    operands = list(pairs[0::2])
    equation = ",".join(_sublist_term(s) for s in pairs[1::2])
    if rest:
        equation += "->" + _sublist_term(rest[0])
    return equation, operands


def _parse_term(term, offset, operand, index, ellipsis_label):
    """The labels of one operand's dims: a letter, or ("...", k) for the k-th of its ellipsis dims
    counted from the right. offset is the term's position in the equation (for messages)."""
    letters, has_ellipsis, k = [], False, 0
    while k < len(term):
        c = term[k]
        if c == ".":
            if term[k:k + 3] != "..." or has_ellipsis:
                raise _error(f"found '.' for operand {index} that is not part of any ellipsis")
            has_ellipsis = True
            letters.append(None)
            k += 3
            continue
        if c not in _LETTERS:
            raise _error(f"invalid subscript given at index {offset + k} in the equation string, subscripts "
                         "must be in [a-zA-Z]")
        letters.append(c)
        k += 1
    named = len(letters) - (1 if has_ellipsis else 0)
    if operand.dim() < named or (not has_ellipsis and operand.dim() != named):
        raise _error(f"the number of subscripts in the equation ({named}) does not match the number of "
                     f"dimensions ({operand.dim()}) for operand {index}"
                     + ("" if has_ellipsis else " and no ellipsis was given"))
    labels = []
    for letter in letters:
        if letter is None:
            n = operand.dim() - named
            labels.extend(ellipsis_label(n - 1 - j) for j in builtins.range(n))
        else:
            labels.append(letter)
    return labels


def _parse(equation, operands):
    """Each operand's labels and the output's. Ellipsis dims are labelled ("...", k), k counted from
    the right, so that they align as broadcasting aligns them."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise _error(f"the equation '{equation}' has {len(terms)} operand(s) but {len(operands)} were given")
    inputs, offset = [], 0
    for index, (term, operand) in enumerate(zip(terms, operands)):
        if not isinstance(operand, _C.Tensor):
            raise TypeError(f"einsum(): operand {index} must be a Tensor, got {type(operand).__name__}")
        inputs.append(_parse_term(term, offset, operand, index, lambda k: ("...", k)))
        offset += len(term) + 1
    ellipsis_dims = builtins.max([l[1] + 1 for labels in inputs for l in labels if isinstance(l, tuple)],
                                 default=0)
    if arrow:
        if "->" in rhs:
            raise _error(f"invalid subscript given at index {equation.index('->', len(lhs) + 2)} in the "
                         "equation string, subscripts must be in [a-zA-Z]")
        output = []
        k = 0
        while k < len(rhs):
            if rhs[k] == ".":
                if rhs[k:k + 3] != "..." or any(isinstance(l, tuple) for l in output):
                    raise _error("found '.' for the output that is not part of any ellipsis")
                output.extend(("...", ellipsis_dims - 1 - j) for j in builtins.range(ellipsis_dims))
                k += 3
                continue
            c = rhs[k]
            if c not in _LETTERS:
                raise _error(f"invalid subscript given at index {len(lhs) + 2 + k} in the equation string, "
                             "subscripts must be in [a-zA-Z]")
            if c in output:
                raise _error(f"output subscript {c} appears more than once in the output")
            if not any(c in labels for labels in inputs):
                raise _error(f"output subscript {c} does not appear in the equation for any input operand")
            output.append(c)
            k += 1
    else:
        # Implicit output: the ellipsis dims, then the subscripts that appear once, alphabetically.
        counts = {}
        for labels in inputs:
            for label in labels:
                if isinstance(label, str):
                    counts[label] = counts.get(label, 0) + 1
        output = [("...", ellipsis_dims - 1 - j) for j in builtins.range(ellipsis_dims)]
        output += sorted((c for c, n in counts.items() if n == 1), key=_LETTERS.index)
    return inputs, output


def _label_name(label):
    return label if isinstance(label, str) else "..."


def _sizes(operands, inputs):
    """The size of every label: equal across operands, or 1 where it broadcasts."""
    sizes = {}
    for index, (operand, labels) in enumerate(zip(operands, inputs)):
        for label, size in zip(labels, operand.shape):
            seen = sizes.get(label, 1)
            if size != 1 and seen != 1 and size != seen:
                raise _error(f"subscript {_label_name(label)} has size {size} for operand {index} which does not "
                             f"broadcast with previously seen size {seen}")
            sizes[label] = builtins.max(seen, size) if size != 1 else seen
    return sizes


def _take_diagonals(operand, labels, index):
    """The operand with each subscript repeated within it reduced to its diagonal (one dim, last)."""
    labels = list(labels)
    while True:
        repeated = next((l for l in labels if labels.count(l) > 1), None)
        if repeated is None:
            return operand, labels
        first = labels.index(repeated)
        second = labels.index(repeated, first + 1)
        if operand.shape[first] != operand.shape[second]:
            raise _error(f"subscript {repeated} is repeated for operand {index} but the sizes don't match, "
                         f"{operand.shape[second]} != {operand.shape[first]}")
        operand = operand.diagonal(0, first, second)
        labels = [l for k, l in enumerate(labels) if k not in (first, second)] + [repeated]


def _sum_out(operand, labels, keep):
    """The operand summed over its dims whose labels are not in keep (its dtype kept)."""
    dims = [k for k, l in enumerate(labels) if l not in keep]
    if not dims:
        return operand, labels
    summed = operand.sum(dims)
    if summed.dtype != operand.dtype:
        summed = summed.to(operand.dtype)
    return summed, [l for l in labels if l in keep]


def _arranged(operand, labels, order, sizes, shape):
    """The operand with its dims in the labels' order, broadcast to their sizes, reshaped to shape."""
    moved = operand.permute([labels.index(l) for l in order])
    return moved.expand([sizes[l] for l in order]).reshape(shape)


def _contract(a, la, b, lb, keep, sizes):
    """a and b contracted over the labels they share that keep does not hold: one bmm with the
    shared kept labels as the batch."""
    a, la = _sum_out(a, la, set(lb) | keep)
    b, lb = _sum_out(b, lb, set(la) | keep)
    batch = [l for l in la if l in lb and l in keep]
    summed = [l for l in la if l in lb and l not in keep]
    left = [l for l in la if l not in lb]
    right = [l for l in lb if l not in la]

    def numel(group):
        n = 1
        for l in group:
            n *= sizes[l]
        return n

    nb, nl, ns, nr = numel(batch), numel(left), numel(summed), numel(right)
    a3 = _arranged(a, la, batch + left + summed, sizes, [nb, nl, ns])
    b3 = _arranged(b, lb, batch + summed + right, sizes, [nb, ns, nr])
    out = a3.bmm(b3).reshape([sizes[l] for l in batch + left + right])
    return out, batch + left + right


def einsum(*args):
    """Sums the product of the operands' elements over the subscripts the output leaves out:
    einsum("bij,bjk->bik", a, b) is a batched matrix product, einsum("ii", a) a trace."""
    equation, operands = _equation_and_operands(args)
    inputs, output = _parse(equation, operands)
    dtypes = {t.dtype for t in operands}
    if len(dtypes) > 1:
        raise _C.DTypeError("[einsum] operands must have one dtype, got "
                            + ", ".join(str(t.dtype) for t in operands))
    sizes = _sizes(operands, inputs)
    terms = [_take_diagonals(t, labels, k) for k, (t, labels) in enumerate(zip(operands, inputs))]
    current, labels = terms[0]
    for k in builtins.range(1, len(terms)):
        keep = set(output).union(*(set(l) for _, l in terms[k + 1:]))
        current, labels = _contract(current, labels, terms[k][0], terms[k][1], keep, sizes)
    current, labels = _sum_out(current, labels, set(output))
    return current.permute([labels.index(l) for l in output])
