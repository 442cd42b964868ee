// The index and metadata utilities of include/smla/metadata.h.
#include <nanobind/nanobind.h>

#include "convert.h"
#include "smla/metadata.h"

namespace smla::py {
namespace {

using nb::arg;

template <typename Fn>
void run_released(Fn fn) {
  nb::gil_scoped_release release;
  fn();
}

}  // namespace

void bind_metadata(nb::module_& m) {
  m.def(
      "req_id_per_token",
      [](nb::handle query_start_loc, nb::handle out, uintptr_t stream) {
        Arrays a;
        TensorView qsl = a.view(query_start_loc, "query_start_loc"), o = a.view(out, "out");
        Exec e = make_exec(a, stream);
        run_released([&] { req_id_per_token(qsl, o, e); });
      },
      arg("query_start_loc"), arg("out"), arg("stream"));

  m.def(
      "page_table_from_req_to_token",
      [](nb::handle req_to_token, nb::handle req_pool_indices, nb::handle seq_lens, int page_size,
         nb::handle block_table, uintptr_t stream) {
        Arrays a;
        TensorView r2t = a.view(req_to_token, "req_to_token"), rpi = a.view(req_pool_indices, "req_pool_indices"),
                   sl = a.view(seq_lens, "seq_lens"), bt = a.view(block_table, "block_table");
        Exec e = make_exec(a, stream);
        run_released([&] { page_table_from_req_to_token(r2t, rpi, sl, page_size, bt, e); });
      },
      arg("req_to_token"), arg("req_pool_indices"), arg("seq_lens"), arg("page_size"), arg("block_table"),
      arg("stream"));

  m.def(
      "positions_to_slots",
      [](nb::handle block_table, int page_size, nb::handle req_id, nb::handle positions, nb::handle slots,
         uintptr_t stream) {
        Arrays a;
        TensorView bt = a.view(block_table, "block_table"), rid = a.view(req_id, "req_id"),
                   pos = a.view(positions, "positions"), sl = a.view(slots, "slots");
        Exec e = make_exec(a, stream);
        run_released([&] { positions_to_slots(bt, page_size, rid, pos, sl, e); });
      },
      arg("block_table"), arg("page_size"), arg("req_id"), arg("positions"), arg("slots"), arg("stream"));

  m.def(
      "sliding_window_indices",
      [](nb::handle positions, int window, nb::handle out, uintptr_t stream) {
        Arrays a;
        TensorView pos = a.view(positions, "positions"), o = a.view(out, "out");
        Exec e = make_exec(a, stream);
        run_released([&] { sliding_window_indices(pos, window, o, e); });
      },
      arg("positions"), arg("window"), arg("out"), arg("stream"));

  m.def(
      "compressed_slot_mapping",
      [](nb::handle positions, nb::handle req_id, nb::handle block_table, int compress_ratio, int states_per_page,
         nb::handle out, uintptr_t stream) {
        Arrays a;
        TensorView pos = a.view(positions, "positions"), rid = a.view(req_id, "req_id"),
                   bt = a.view(block_table, "block_table"), o = a.view(out, "out");
        Exec e = make_exec(a, stream);
        run_released([&] { compressed_slot_mapping(pos, rid, bt, compress_ratio, states_per_page, o, e); });
      },
      arg("positions"), arg("req_id"), arg("block_table"), arg("compress_ratio"), arg("states_per_page"),
      arg("out"), arg("stream"));

  m.def(
      "dcp_local_seqlens",
      [](nb::handle seqlens, int world, int interleave, int rank, nb::handle out, uintptr_t stream) {
        Arrays a;
        TensorView sl = a.view(seqlens, "seqlens"), o = a.view(out, "out");
        Exec e = make_exec(a, stream);
        DcpLayout d{world, interleave};
        run_released([&] { dcp_local_seqlens(sl, d, rank, o, e); });
      },
      arg("seqlens"), arg("world"), arg("interleave"), arg("rank"), arg("out"), arg("stream"));
  m.def(
      "dcp_local_topk",
      [](nb::handle positions, nb::handle block_table, int page_size, int world, int interleave, int rank,
         nb::handle slots, nb::handle counts, nb::handle topk_length, uintptr_t stream) {
        Arrays a;
        TensorView pos = a.view(positions, "positions"), bt = a.view(block_table, "block_table"),
                   sl = a.view(slots, "slots"), cn = a.view(counts, "counts"),
                   tl = a.view(topk_length, "topk_length");
        Exec e = make_exec(a, stream);
        DcpLayout d{world, interleave};
        run_released([&] { dcp_local_topk(pos, bt, page_size, d, rank, sl, cn, tl, e); });
      },
      arg("positions"), arg("block_table"), arg("page_size"), arg("world"), arg("interleave"), arg("rank"),
      arg("slots"), arg("counts"), arg("topk_length").none(), arg("stream"));
  m.def(
      "dcp_owner_rank", [](int64_t p, int world, int interleave) { return dcp_owner_rank(p, {world, interleave}); },
      arg("p"), arg("world"), arg("interleave"));
  m.def(
      "dcp_local_position",
      [](int64_t p, int world, int interleave) { return dcp_local_position(p, {world, interleave}); }, arg("p"),
      arg("world"), arg("interleave"));
  m.def(
      "dcp_local_length",
      [](int64_t length, int world, int interleave, int rank) {
        return dcp_local_length(length, {world, interleave}, rank);
      },
      arg("length"), arg("world"), arg("interleave"), arg("rank"));

  m.def(
      "decode_split_schedule",
      [](nb::handle lengths, int num_units, int block_n, int max_keys, nb::handle split_offsets, uintptr_t stream) {
        Arrays a;
        TensorView len = a.view(lengths, "lengths"), so = a.view(split_offsets, "split_offsets");
        Exec e = make_exec(a, stream);
        SplitSchedulePlan plan{num_units, block_n, max_keys};
        run_released([&] { decode_split_schedule(len, plan, so, e); });
      },
      arg("lengths"), arg("num_units"), arg("block_n"), arg("max_keys"), arg("split_offsets"), arg("stream"));
  m.def("max_total_splits", &max_total_splits, arg("batch"), arg("num_units"));
}

}  // namespace smla::py
