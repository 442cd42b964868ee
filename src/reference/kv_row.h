// Reading one token's key row out of a paged cache in any format, dequantized to float.
// The single CPU implementation of SPEC §2's byte layouts on the read side.
#pragma once

#include <cstdint>

#include "smla/formats.h"

namespace smla::ref {

// Address of a token's first byte (its head `head` row for element formats).
const uint8_t* token_address(const PagedCache& c, int64_t slot, int head = 0);
// Dequantize the key row of `slot` (0 <= slot < c.num_slots(), checked by the caller)
// into dst[0 .. c.d_qk()).
void dequant_key_row(const PagedCache& c, int64_t slot, int head, float* dst);

}  // namespace smla::ref
