// Every kernel table of the library, defined once: each family's header names its tables with
// RTX_KERNEL, which this file turns into definitions. This list names every family; a new family
// adds its header here.
#define RTX_DEFINING_KERNEL_TABLES
#include "dispatch/amp.h"
#include "dispatch/attention.h"
#include "dispatch/conv.h"
#include "dispatch/copy.h"
#include "dispatch/foreach.h"
#include "dispatch/index.h"
#include "dispatch/linalg.h"
#include "dispatch/loss.h"
#include "dispatch/nn.h"
#include "dispatch/norm.h"
#include "dispatch/optim.h"
#include "dispatch/pointwise.h"
#include "dispatch/pool.h"
#include "dispatch/random.h"
#include "dispatch/reduce.h"
#include "dispatch/sort.h"
