// The whole public C++ API: #include <rtx/rtx.h>
#pragma once

#include "rtx/autograd.h"
#include "rtx/config.h"
#include "rtx/cuda.h"
#include "rtx/data.h"
#include "rtx/device.h"
#include "rtx/dtype.h"
#include "rtx/error.h"
#include "rtx/nn.h"
#include "rtx/ops.h"
#include "rtx/optim.h"
#include "rtx/scalar.h"
#include "rtx/settings.h"
#include "rtx/tensor.h"
#include "rtx/text.h"
#include "rtx/version.h"
