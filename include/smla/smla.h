// smla: MLA attention kernels (sparse and dense, FP8 caches) for LLM serving.
#pragma once

#include "smla/capabilities.h"
#include "smla/dcp.h"
#include "smla/error.h"
#include "smla/formats.h"
#include "smla/metadata.h"
#include "smla/numeric.h"
#include "smla/ops.h"
#include "smla/tensor.h"
#include "smla/version.h"
