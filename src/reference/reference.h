// The CPU backend: the SPEC in code. Called after validation, on CPU tensors.
#pragma once

#include "smla/dcp.h"
#include "smla/metadata.h"
#include "smla/ops.h"

namespace smla::ref {

void sparse_decode(const SparseDecodeArgs& a);
void sparse_prefill(const SparsePrefillArgs& a);
void dense_decode(const DenseDecodeArgs& a);
void merge_states(const MergeStatesArgs& a);
void write_cache(const WriteCacheArgs& a);
void gather_cache(const GatherCacheArgs& a);
void dcp_rescale(const DcpRescaleArgs& a);

}  // namespace smla::ref
