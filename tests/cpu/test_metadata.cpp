// Index and metadata utilities (SPEC §4.6) against naive loops written here from the
// header's rules, on random inputs full of values that make no sense (negative, INT32_MIN,
// INT32_MAX, past every table), plus the split-schedule and DCP invariants.
#include <algorithm>
#include <climits>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "smla/capabilities.h"
#include "metadata/index_math.h"
#include "smla/metadata.h"

namespace smla {
namespace {

namespace t = smla::test;

constexpr int32_t kPoison32 = 0x5a5a5a5a;
constexpr int64_t kPoison64 = 0x5a5a5a5a5a5a5a5aLL;

// A value in [lo, hi] most of the time, otherwise one that no table can hold.
int32_t nasty(int64_t lo, int64_t hi) {
  switch (t::uniform_int(0, 9)) {
    case 0: return INT32_MIN;
    case 1: return INT32_MAX;
    case 2: return -1;
    case 3: return static_cast<int32_t>(t::uniform_int(INT32_MIN, -1));
    case 4: return static_cast<int32_t>(t::uniform_int(std::min<int64_t>(hi + 1, INT32_MAX), INT32_MAX));
    default: return static_cast<int32_t>(t::uniform_int(lo, hi));
  }
}

std::vector<int32_t> nasty_vec(size_t n, int64_t lo, int64_t hi) {
  std::vector<int32_t> v(n);
  for (auto& x : v) x = nasty(lo, hi);
  return v;
}

// A view of v; n = 0 still gets a real pointer (an empty vector's data() may be null,
// which the API reads as "absent").
template <typename T>
TensorView view(std::vector<T>& v, std::initializer_list<int64_t> shape, Device dev = kCPU) {
  if (v.empty()) v.reserve(1);
  DType dt = sizeof(T) == 8 ? DType::i64 : DType::i32;
  return make_view(v.data(), dt, shape, dev);
}

template <typename T>
void expect_rejected(const std::function<void()>& call, const std::vector<std::string>& fragments,
                     const std::vector<T>& out) {
  auto before = t::snapshot(out);
  t::expect_error(call, fragments);
  EXPECT_EQ(t::snapshot(out), before) << "a rejected call wrote its output";
}

// ------------------------------------------------------------------- req_id_per_token

std::vector<int32_t> naive_req_ids(const std::vector<int32_t>& qsl, int64_t T) {
  std::vector<int32_t> out(T, -1);
  for (int64_t tok = 0; tok < T; ++tok)
    for (size_t r = 0; r + 1 < qsl.size(); ++r)
      if (qsl[r] <= tok && tok < qsl[r + 1]) {
        out[tok] = static_cast<int32_t>(r);
        break;
      }
  return out;
}

TEST(MetaReqIdPerToken, SortedStartsWithEmptyRequestsAndTail) {
  for (int iter = 0; iter < 50; ++iter) {
    int64_t b = t::uniform_int(1, 40);
    std::vector<int32_t> qsl(b + 1);
    qsl[0] = static_cast<int32_t>(t::uniform_int(-3, 3));
    for (int64_t r = 1; r <= b; ++r) qsl[r] = qsl[r - 1] + static_cast<int32_t>(t::uniform_int(0, 6));
    int64_t T = std::max<int64_t>(0, qsl[b] + t::uniform_int(0, 4));
    std::vector<int32_t> out(T, kPoison32);
    req_id_per_token(view(qsl, {b + 1}), view(out, {T}));
    EXPECT_EQ(out, naive_req_ids(qsl, T)) << "b " << b;
  }
}

TEST(MetaReqIdPerToken, AnyValuesFirstMatchingRequestWins) {
  for (int iter = 0; iter < 50; ++iter) {
    int64_t b = t::uniform_int(1, 30);
    int64_t T = t::uniform_int(0, 60);
    std::vector<int32_t> qsl = nasty_vec(b + 1, 0, T);
    std::vector<int32_t> out(T, kPoison32);
    req_id_per_token(view(qsl, {b + 1}), view(out, {T}));
    EXPECT_EQ(out, naive_req_ids(qsl, T));
  }
  // r0 = [0, 5), r1 = [5, 1) is empty, r2 = [1, 3) overlaps r0: the first one wins.
  std::vector<int32_t> qsl{0, 5, 1, 3}, out(7, kPoison32);
  req_id_per_token(view(qsl, {4}), view(out, {7}));
  EXPECT_EQ(out, (std::vector<int32_t>{0, 0, 0, 0, 0, -1, -1}));
}

TEST(MetaReqIdPerToken, ManyTokensBothSearches) {
  // Large enough for the threaded host loop.
  int64_t b = 64, T = 20000;
  std::vector<int32_t> sorted(b + 1), unsorted;
  for (int64_t r = 1; r <= b; ++r) sorted[r] = sorted[r - 1] + static_cast<int32_t>(t::uniform_int(0, 600));
  unsorted = nasty_vec(b + 1, 0, T);
  for (auto* qsl : {&sorted, &unsorted}) {
    std::vector<int32_t> out(T, kPoison32);
    req_id_per_token(view(*qsl, {b + 1}), view(out, {T}));
    EXPECT_EQ(out, naive_req_ids(*qsl, T));
  }
}

TEST(MetaReqIdPerToken, NoRequests) {
  std::vector<int32_t> qsl{0}, out(3, kPoison32), none;
  req_id_per_token(view(qsl, {1}), view(out, {3}));
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, -1}));
  req_id_per_token(view(qsl, {1}), view(none, {0}));
}

TEST(MetaReqIdPerToken, Rejects) {
  std::vector<int32_t> qsl{0, 2, 4}, out(4, kPoison32);
  std::vector<int64_t> qsl64{0, 2, 4};
  auto q = view(qsl, {3});
  auto o = view(out, {4});
  expect_rejected([&] { req_id_per_token(view(qsl64, {3}), o); },
                  {"query_start_loc must be int32 of shape (*,)", "got int64 (3,)"}, out);
  expect_rejected([&] { req_id_per_token(make_view(qsl.data(), DType::i32, {0}), o); },
                  {"query_start_loc must be int32 of shape (b+1,) with b >= 0", "got int32 (0,)"}, out);
  expect_rejected([&] { req_id_per_token(q, make_view(out.data(), DType::i32, {2, 2})); },
                  {"out must be int32 of shape (*,)", "got int32 (2, 2)"}, out);
  expect_rejected([&] { req_id_per_token(q, make_view(out.data(), DType::i32, {4}, cuda_device(0))); },
                  {"out must be on cpu like query_start_loc", "got on cuda:0"}, out);
  expect_rejected([&] { req_id_per_token(q, make_strided_view(out.data(), DType::i32, {2}, {2})); },
                  {"out must be a tensor with its last", "got strides (2,)"}, out);
  expect_rejected([&] { req_id_per_token(make_strided_view(qsl.data(), DType::i32, {2}, {2}), o); },
                  {"query_start_loc must be a tensor with its last dimension contiguous", "got strides (2,)"},
                  out);
  expect_rejected([&] { req_id_per_token(q, make_view(qsl.data(), DType::i32, {3})); },
                  {"out must be a buffer distinct from query_start_loc", "got the same data pointer"}, qsl);
  expect_rejected([&] { req_id_per_token(q, TensorView{}); }, {"out must be int32", "got nothing"}, out);
}

// ------------------------------------------------------- page_table_from_req_to_token

TEST(MetaPageTable, MatchesNaiveWithInvalidRequestsLengthsAndTokens) {
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t max_reqs = t::uniform_int(1, 6), max_ctx = t::uniform_int(1, 300);
    const int64_t row_stride = max_ctx + t::uniform_int(0, 5);
    const int page_size = static_cast<int>(std::vector<int>{1, 16, 64, 7}[t::uniform_int(0, 3)]);
    const int64_t b = t::uniform_int(0, 8), max_pages = t::uniform_int(1, 12);
    std::vector<int32_t> r2t = nasty_vec(max_reqs * row_stride, 0, 1 << 20);
    std::vector<int32_t> pool = nasty_vec(b, 0, max_reqs - 1);
    std::vector<int32_t> lens = nasty_vec(b, 0, max_ctx + 2 * page_size);
    std::vector<int32_t> table(b * max_pages, kPoison32);
    page_table_from_req_to_token(make_strided_view(r2t.data(), DType::i32, {max_reqs, max_ctx}, {row_stride, 1}),
                                 view(pool, {b}), view(lens, {b}), page_size, view(table, {b, max_pages}));
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t p = 0; p < max_pages; ++p) {
        int64_t want = -1, r = pool[i], len = lens[i];
        int64_t pages = len > 0 ? (len + page_size - 1) / page_size : 0;
        if (r >= 0 && r < max_reqs && p < pages && p * page_size < max_ctx) {
          int64_t slot = r2t[r * row_stride + p * page_size];
          want = slot < 0 ? -1 : slot / page_size;
        }
        ASSERT_EQ(table[i * max_pages + p], want) << "request " << i << " page " << p << " r " << r << " len "
                                                 << len << " page_size " << page_size;
      }
    }
  }
}

TEST(MetaPageTable, SGLangLayout) {
  // Two requests whose tokens sit in pages 3, 7 and 2 (page 4); request 1 uses pool row 0.
  const int page = 4;
  std::vector<int32_t> r2t(2 * 12, -1);
  for (int k = 0; k < 8; ++k) r2t[1 * 12 + k] = (k < 4 ? 3 : 7) * page + k % 4;
  for (int k = 0; k < 3; ++k) r2t[0 * 12 + k] = 2 * page + k;
  std::vector<int32_t> pool{1, 0}, lens{6, 3}, table(2 * 3, kPoison32);
  page_table_from_req_to_token(view(r2t, {2, 12}), view(pool, {2}), view(lens, {2}), page, view(table, {2, 3}));
  EXPECT_EQ(table, (std::vector<int32_t>{3, 7, -1, 2, -1, -1}));
}

TEST(MetaPageTable, Rejects) {
  std::vector<int32_t> r2t(2 * 8, 0), pool{0, 1}, lens{3, 3}, table(2 * 2, kPoison32), lens3{1, 2, 3};
  std::vector<int64_t> r2t64(16, 0);
  auto R = view(r2t, {2, 8});
  auto P = view(pool, {2});
  auto L = view(lens, {2});
  auto B = view(table, {2, 2});
  expect_rejected([&] { page_table_from_req_to_token(R, P, L, 0, B); }, {"page_size must be at least 1", "got 0"},
                  table);
  expect_rejected([&] { page_table_from_req_to_token(view(r2t64, {2, 8}), P, L, 4, B); },
                  {"req_to_token must be int32 of shape (*, *)", "got int64 (2, 8)"}, table);
  // A request-count mismatch names the shorter argument, whichever it is.
  expect_rejected([&] { page_table_from_req_to_token(R, P, view(lens3, {3}), 4, B); },
                  {"req_pool_indices must be int32 of shape (3,)", "got int32 (2,)"}, table);
  expect_rejected([&] { page_table_from_req_to_token(R, P, view(lens3, {1}), 4, B); },
                  {"seq_lens must be int32 of shape (2,)", "got int32 (1,)"}, table);
  expect_rejected([&] { page_table_from_req_to_token(R, P, L, 4, make_view(table.data(), DType::i32, {1, 4})); },
                  {"block_table must be int32 of shape (2, *)", "got int32 (1, 4)"}, table);
  expect_rejected([&] { page_table_from_req_to_token(R, view(pool, {2}, cuda_device(0)), L, 4, B); },
                  {"req_pool_indices must be on cpu like req_to_token", "got on cuda:0"}, table);
  expect_rejected(
      [&] { page_table_from_req_to_token(make_strided_view(r2t.data(), DType::i32, {2, 4}, {8, 2}), P, L, 4, B); },
      {"req_to_token must be a tensor with its last dimension contiguous", "got strides (8, 2)"}, table);
  expect_rejected(
      [&] { page_table_from_req_to_token(R, P, L, 4, make_strided_view(table.data(), DType::i32, {2, 1}, {2, 1})); },
      {"block_table must be a tensor with its last 2 dimensions packed row-major", "got strides (2, 1)"}, table);
}

// ----------------------------------------------------------------- positions_to_slots

int32_t naive_slot(const std::vector<int32_t>& table, int64_t b, int64_t max_blocks, int64_t r, int64_t p,
                   int64_t page) {
  if (r < 0 || r >= b || p < 0 || p / page >= max_blocks) return -1;
  int64_t e = table[r * max_blocks + p / page];
  if (e < 0) return -1;
  int64_t s = e * page + p % page;
  return s > INT32_MAX ? -1 : static_cast<int32_t>(s);
}

TEST(MetaPositionsToSlots, MatchesNaive) {
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t b = t::uniform_int(1, 6), max_blocks = t::uniform_int(1, 10);
    const int page = static_cast<int>(std::vector<int>{1, 2, 64, 13}[t::uniform_int(0, 3)]);
    // Block ids near INT32_MAX / page make slots that do not fit int32.
    std::vector<int32_t> table = nasty_vec(b * max_blocks, 0, 200);
    for (auto& e : table)
      if (t::uniform_int(0, 9) == 0) e = static_cast<int32_t>(INT32_MAX / page - t::uniform_int(-1, 1));
    const int64_t T = t::uniform_int(0, 20), k = t::uniform_int(1, 40), pstride = k + t::uniform_int(0, 3);
    std::vector<int32_t> req = nasty_vec(T, 0, b - 1);
    std::vector<int32_t> pos = nasty_vec(std::max<int64_t>(T * pstride, 1), 0, max_blocks * page + page);
    std::vector<int32_t> slots(T * k, kPoison32);
    positions_to_slots(view(table, {b, max_blocks}), page, view(req, {T}),
                       make_strided_view(pos.data(), DType::i32, {T, k}, {pstride, 1}), view(slots, {T, k}));
    for (int64_t tk = 0; tk < T; ++tk)
      for (int64_t j = 0; j < k; ++j)
        ASSERT_EQ(slots[tk * k + j], naive_slot(table, b, max_blocks, req[tk], pos[tk * pstride + j], page))
            << "token " << tk << " entry " << j;
  }
}

TEST(MetaPositionsToSlots, Int32Boundary) {
  // page 2, block 2^30 - 1: slots 2^31 - 2 and 2^31 - 1 fit; block 2^30 would not.
  std::vector<int32_t> table{(1 << 30) - 1, 1 << 30}, req{0, 0, 0, 0}, pos{0, 1, 2, 3}, slots(4, kPoison32);
  positions_to_slots(view(table, {1, 2}), 2, view(req, {4}), view(pos, {4, 1}), view(slots, {4, 1}));
  EXPECT_EQ(slots, (std::vector<int32_t>{INT32_MAX - 1, INT32_MAX, -1, -1}));
}

TEST(MetaPositionsToSlots, ManyTokens) {
  const int64_t b = 8, max_blocks = 64, T = 2048, k = 128;
  const int page = 64;
  std::vector<int32_t> table = nasty_vec(b * max_blocks, 0, 10000);
  std::vector<int32_t> req = nasty_vec(T, 0, b - 1), pos = nasty_vec(T * k, 0, max_blocks * page);
  std::vector<int32_t> slots(T * k, kPoison32);
  positions_to_slots(view(table, {b, max_blocks}), page, view(req, {T}), view(pos, {T, k}), view(slots, {T, k}));
  for (int64_t i = 0; i < T * k; ++i)
    ASSERT_EQ(slots[i], naive_slot(table, b, max_blocks, req[i / k], pos[i], page)) << i;
}

TEST(MetaPositionsToSlots, Rejects) {
  std::vector<int32_t> table(2 * 4, 1), req{0, 1, 0}, pos(3 * 5, 2), slots(3 * 5, kPoison32), req2{0, 1};
  auto Bt = view(table, {2, 4});
  auto Rq = view(req, {3});
  auto Ps = view(pos, {3, 5});
  auto S = view(slots, {3, 5});
  expect_rejected([&] { positions_to_slots(Bt, 0, Rq, Ps, S); }, {"page_size must be at least 1", "got 0"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, -4, Rq, Ps, S); }, {"page_size must be at least 1", "got -4"}, slots);
  // A token-count mismatch names the shorter argument, whichever it is.
  expect_rejected([&] { positions_to_slots(Bt, 4, view(req2, {2}), Ps, S); },
                  {"req_id must be int32 of shape (3,)", "got int32 (2,)"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, view(pos, {2, 5}), S); },
                  {"positions must be int32 of shape (3, *)", "got int32 (2, 5)"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, Ps, make_view(slots.data(), DType::i32, {3, 4})); },
                  {"slots must be int32 of shape (3, 5)", "got int32 (3, 4)"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, Ps, make_view(slots.data(), DType::i64, {3, 5})); },
                  {"slots must be int32 of shape (3, 5)", "got int64 (3, 5)"}, slots);
  expect_rejected([&] { positions_to_slots(make_view(table.data(), DType::i32, {8}), 4, Rq, Ps, S); },
                  {"block_table must be int32 of shape (*, *)", "got int32 (8,)"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, view(pos, {3, 5}, cuda_device(0)), S); },
                  {"positions must be on cpu like block_table", "got on cuda:0"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, make_strided_view(pos.data(), DType::i32, {3, 5}, {5, 2}), S); },
                  {"positions must be a tensor with its last dimension contiguous", "got strides (5, 2)"}, slots);
  expect_rejected([&] { positions_to_slots(Bt, 4, Rq, Ps, view(pos, {3, 5})); },
                  {"slots must be a buffer distinct from positions", "got the same data pointer"}, pos);
}

// ------------------------------------------------------------- sliding_window_indices

TEST(MetaSlidingWindow, MatchesNaive) {
  for (int iter = 0; iter < 30; ++iter) {
    const int window = static_cast<int>(t::uniform_int(1, 300));
    const int64_t T = t::uniform_int(0, 40);
    std::vector<int32_t> pos = nasty_vec(T, 0, 2 * window);
    std::vector<int32_t> out(T * window, kPoison32);
    sliding_window_indices(view(pos, {T}), window, view(out, {T, window}));
    for (int64_t tk = 0; tk < T; ++tk) {
      std::vector<int32_t> want;
      if (pos[tk] >= 0)
        for (int64_t q = std::max<int64_t>(int64_t{pos[tk]} - window + 1, 0); q <= pos[tk]; ++q)
          want.push_back(static_cast<int32_t>(q));
      want.resize(window, -1);
      ASSERT_EQ(std::vector<int32_t>(out.begin() + tk * window, out.begin() + (tk + 1) * window), want)
          << "pos " << pos[tk] << " window " << window;
    }
  }
}

TEST(MetaSlidingWindow, Examples) {
  std::vector<int32_t> pos{0, 2, 9, -1}, out(4 * 4, kPoison32);
  sliding_window_indices(view(pos, {4}), 4, view(out, {4, 4}));
  EXPECT_EQ(out, (std::vector<int32_t>{0, -1, -1, -1, 0, 1, 2, -1, 6, 7, 8, 9, -1, -1, -1, -1}));
}

TEST(MetaSlidingWindow, Rejects) {
  std::vector<int32_t> pos{3, 4}, out(2 * 8, kPoison32);
  std::vector<int64_t> pos64{3, 4};
  expect_rejected([&] { sliding_window_indices(view(pos, {2}), 0, view(out, {2, 8})); },
                  {"window must be at least 1", "got 0"}, out);
  expect_rejected([&] { sliding_window_indices(view(pos, {2}), 4, view(out, {2, 8})); },
                  {"out must be int32 of shape (2, 4)", "got int32 (2, 8)"}, out);
  expect_rejected([&] { sliding_window_indices(view(pos64, {2}), 8, view(out, {2, 8})); },
                  {"positions must be int32 of shape (*,)", "got int64 (2,)"}, out);
  expect_rejected([&] { sliding_window_indices(view(pos, {2}), 8, view(out, {2, 8}, cuda_device(1))); },
                  {"out must be on cpu like positions", "got on cuda:1"}, out);
}

// ------------------------------------------------------------ compressed_slot_mapping

TEST(MetaCompressedSlots, MatchesNaive) {
  for (int iter = 0; iter < 40; ++iter) {
    const int ratio = static_cast<int>(std::vector<int>{1, 2, 4, 128, 3}[t::uniform_int(0, 4)]);
    const int spp = static_cast<int>(t::uniform_int(1, 70));
    const int64_t b = t::uniform_int(1, 5), max_blocks = t::uniform_int(1, 8);
    const int64_t T = t::uniform_int(0, 64);
    std::vector<int32_t> table = nasty_vec(b * max_blocks, 0, 5000);
    std::vector<int32_t> req = nasty_vec(T, 0, b - 1);
    std::vector<int64_t> pos(T);
    const int64_t reach = int64_t{ratio} * spp * (max_blocks + 1);
    for (auto& p : pos) {
      switch (t::uniform_int(0, 7)) {
        case 0: p = INT64_MAX - t::uniform_int(0, 2); break;
        case 1: p = INT64_MIN + t::uniform_int(0, 2); break;
        case 2: p = -t::uniform_int(1, 1000); break;
        default: p = t::uniform_int(0, reach);
      }
    }
    std::vector<int64_t> out(T, kPoison64);
    compressed_slot_mapping(view(pos, {T}), view(req, {T}), view(table, {b, max_blocks}), ratio, spp, view(out, {T}));
    for (int64_t tk = 0; tk < T; ++tk) {
      int64_t want = -1, p = pos[tk], r = req[tk];
      if (p >= 0 && (static_cast<__int128>(p) + 1) % ratio == 0 && r >= 0 && r < b) {
        int64_t c = p / ratio;
        if (c / spp < max_blocks) {
          int64_t e = table[r * max_blocks + c / spp];
          if (e >= 0) want = e * spp + c % spp;
        }
      }
      ASSERT_EQ(out[tk], want) << "pos " << p << " req " << r << " ratio " << ratio << " states/page " << spp;
    }
  }
}

TEST(MetaCompressedSlots, Example) {
  // Ratio 4, 2 states per page, pages {5, 9}: positions 3, 7, 11 write states 0, 1, 2.
  std::vector<int64_t> pos{0, 3, 7, 11, 12, 15}, out(6, kPoison64);
  std::vector<int32_t> req(6, 0), table{5, 9};
  compressed_slot_mapping(view(pos, {6}), view(req, {6}), view(table, {1, 2}), 4, 2, view(out, {6}));
  EXPECT_EQ(out, (std::vector<int64_t>{-1, 10, 11, 18, -1, 19}));
}

TEST(MetaCompressedSlots, Rejects) {
  std::vector<int64_t> pos{3, 7}, out(2, kPoison64);
  std::vector<int32_t> req{0, 0}, table{1, 2}, pos32{3, 7}, out32(2, kPoison32);
  auto P = view(pos, {2});
  auto R = view(req, {2});
  auto Bt = view(table, {1, 2});
  auto O = view(out, {2});
  expect_rejected([&] { compressed_slot_mapping(P, R, Bt, 0, 4, O); }, {"compress_ratio must be at least 1", "got 0"},
                  out);
  expect_rejected([&] { compressed_slot_mapping(P, R, Bt, 4, 0, O); },
                  {"states_per_page must be at least 1", "got 0"}, out);
  expect_rejected([&] { compressed_slot_mapping(view(pos32, {2}), R, Bt, 4, 2, O); },
                  {"positions must be int64 of shape (*,)", "got int32 (2,)"}, out);
  expect_rejected([&] { compressed_slot_mapping(P, R, Bt, 4, 2, view(out32, {2})); },
                  {"out must be int64 of shape (2,)", "got int32 (2,)"}, out32);
  expect_rejected([&] { compressed_slot_mapping(P, make_view(req.data(), DType::i32, {1}), Bt, 4, 2, O); },
                  {"req_id must be int32 of shape (2,)", "got int32 (1,)"}, out);
  expect_rejected([&] { compressed_slot_mapping(P, R, view(table, {1, 2}, cuda_device(0)), 4, 2, O); },
                  {"block_table must be on cpu like positions", "got on cuda:0"}, out);
  expect_rejected([&] { compressed_slot_mapping(P, R, Bt, 4, 2, P); },
                  {"out must be a buffer distinct from positions", "got the same data pointer"}, pos);
}

// ------------------------------------------------------------------------------- DCP

// Owner of each position by dealing runs of I positions to ranks 0, 1, ..., N-1, 0, ...
std::vector<int> dealt_owners(int64_t L, int N, int I) {
  std::vector<int> owner(L);
  int rank = 0, run = 0;
  for (int64_t p = 0; p < L; ++p) {
    owner[p] = rank;
    if (++run == I) {
      run = 0;
      rank = (rank + 1) % N;
    }
  }
  return owner;
}

TEST(MetaDcp, BruteForceSmall) {
  for (int N = 1; N <= 6; ++N) {
    for (int I = 1; I <= 6; ++I) {
      const int64_t L = t::uniform_int(0, 200);
      const DcpLayout d{N, I};
      std::vector<int> owner = dealt_owners(L, N, I);
      std::vector<int64_t> next(N, 0);
      for (int64_t p = 0; p < L; ++p) {
        ASSERT_EQ(dcp_owner_rank(p, d), owner[p]) << "p " << p << " N " << N << " I " << I;
        ASSERT_EQ(dcp_local_position(p, d), next[owner[p]]++) << "p " << p << " N " << N << " I " << I;
      }
      for (int r = 0; r < N; ++r) {
        // Every prefix length too, not only L.
        for (int64_t l = 0; l <= L; ++l) {
          int64_t count = 0;
          for (int64_t p = 0; p < l; ++p) count += owner[p] == r;
          ASSERT_EQ(dcp_local_length(l, d, r), count) << "L " << l << " N " << N << " I " << I << " rank " << r;
        }
      }
    }
  }
}

int64_t closed_form_local(int64_t L, int N, int I, int r) {
  if (L <= 0) return 0;
  const int64_t round = int64_t{I} * N, rem = L % round;
  return L / round * I + std::min<int64_t>(std::max<int64_t>(rem - int64_t{r} * I, 0), I);
}

TEST(MetaDcp, LargeAndNegative) {
  for (int iter = 0; iter < 200; ++iter) {
    const int N = static_cast<int>(t::uniform_int(1, 64)), I = static_cast<int>(t::uniform_int(1, 256));
    const int64_t L = t::uniform_int(0, int64_t{1} << 50);
    int64_t sum = 0, prev = INT64_MAX;
    for (int r = 0; r < N; ++r) {
      int64_t local = dcp_local_length(L, {N, I}, r);
      ASSERT_EQ(local, closed_form_local(L, N, I, r));
      ASSERT_LE(local, prev);  // earlier ranks never hold fewer tokens
      prev = local;
      sum += local;
    }
    ASSERT_EQ(sum, L);
    ASSERT_LE(dcp_local_length(L, {N, I}, 0) - dcp_local_length(L, {N, I}, N - 1), I);
    const int64_t p = t::uniform_int(0, int64_t{1} << 50);
    ASSERT_EQ(dcp_owner_rank(p, {N, I}), (p / I) % N);
    ASSERT_EQ(dcp_local_position(p, {N, I}), p / (int64_t{I} * N) * I + p % I);
  }
  EXPECT_EQ(dcp_local_length(-5, {4, 2}, 1), 0);
  EXPECT_EQ(dcp_local_length(INT64_MIN, {4, 2}, 0), 0);
  EXPECT_EQ(dcp_local_length(INT64_MAX, {1, 1}, 0), INT64_MAX);
  EXPECT_EQ(dcp_owner_rank(-1, {4, 2}), -1);
  EXPECT_EQ(dcp_local_position(-7, {4, 2}), -1);
  EXPECT_EQ(dcp_owner_rank(INT64_MAX, {INT32_MAX, INT32_MAX}), (INT64_MAX / INT32_MAX) % INT32_MAX);
}

TEST(MetaDcp, SeqlensTensor) {
  for (int iter = 0; iter < 20; ++iter) {
    const int N = static_cast<int>(t::uniform_int(1, 8)), I = static_cast<int>(t::uniform_int(1, 64));
    const int rank = static_cast<int>(t::uniform_int(0, N - 1));
    const int64_t b = t::uniform_int(0, 50);
    std::vector<int32_t> lens = nasty_vec(b, 0, 5000), out(b, kPoison32);
    dcp_local_seqlens(view(lens, {b}), {N, I}, rank, view(out, {b}));
    for (int64_t i = 0; i < b; ++i)
      ASSERT_EQ(out[i], closed_form_local(lens[i], N, I, rank)) << "L " << lens[i] << " N " << N << " I " << I;
  }
}

TEST(MetaDcp, Rejects) {
  t::expect_error([] { dcp_owner_rank(3, {0, 1}); }, {"DcpLayout.world must be at least 1", "got 0"});
  t::expect_error([] { dcp_local_position(3, {2, 0}); }, {"DcpLayout.interleave must be at least 1", "got 0"});
  t::expect_error([] { dcp_local_length(3, {2, -3}, 0); }, {"DcpLayout.interleave must be at least 1", "got -3"});
  t::expect_error([] { dcp_local_length(3, {2, 1}, 2); }, {"rank must be between 0 and world - 1 = 1", "got 2"});
  t::expect_error([] { dcp_local_length(3, {2, 1}, -1); }, {"rank must be between 0 and world - 1 = 1", "got -1"});
  std::vector<int32_t> lens{5, 6, 7}, out(3, kPoison32);
  std::vector<int64_t> lens64{5, 6, 7};
  auto L = view(lens, {3});
  auto O = view(out, {3});
  expect_rejected([&] { dcp_local_seqlens(L, {2, 1}, 2, O); }, {"rank must be between 0 and world - 1 = 1", "got 2"},
                  out);
  expect_rejected([&] { dcp_local_seqlens(L, {0, 1}, 0, O); }, {"DcpLayout.world must be at least 1", "got 0"}, out);
  expect_rejected([&] { dcp_local_seqlens(view(lens64, {3}), {2, 1}, 0, O); },
                  {"seqlens must be int32 of shape (*,)", "got int64 (3,)"}, out);
  expect_rejected([&] { dcp_local_seqlens(L, {2, 1}, 0, make_view(out.data(), DType::i32, {2})); },
                  {"out must be int32 of shape (3,)", "got int32 (2,)"}, out);
  expect_rejected([&] { dcp_local_seqlens(L, {2, 1}, 0, view(out, {3}, cuda_device(0))); },
                  {"out must be on cpu like seqlens", "got on cuda:0"}, out);
  expect_rejected([&] { dcp_local_seqlens(L, {2, 1}, 0, L); },
                  {"out must be a buffer distinct from seqlens", "got the same data pointer"}, lens);
}

// ----------------------------------------------------------------- rank-local top-k (DCP)

// The rule of the header, written out: each row keeps, in order, the positions the rank owns
// whose local position has a slot in the rank's table, then -1; topk_length is the largest
// count of the request.
struct LocalTopk {
  std::vector<int32_t> slots, counts, topk_length;
};

LocalTopk naive_local_topk(const std::vector<int32_t>& pos, int64_t st0, int64_t st1, const std::vector<int32_t>& table,
                           int64_t table_st, int64_t b, int64_t s_q, int64_t k, int64_t max_blocks, int64_t page,
                           int N, int I, int rank) {
  LocalTopk r{std::vector<int32_t>(b * s_q * k, -1), std::vector<int32_t>(b * s_q, 0), std::vector<int32_t>(b, 0)};
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < s_q; ++j) {
      int32_t kept = 0;
      for (int64_t e = 0; e < k; ++e) {
        const int64_t p = pos[i * st0 + j * st1 + e];
        if (p < 0 || (p / I) % N != rank) continue;
        const int64_t lp = p / (int64_t{I} * N) * I + p % I;
        if (lp / page >= max_blocks) continue;
        const int64_t entry = table[i * table_st + lp / page];
        if (entry < 0) continue;
        const int64_t slot = entry * page + lp % page;
        if (slot > INT32_MAX) continue;
        r.slots[(i * s_q + j) * k + kept++] = static_cast<int32_t>(slot);
      }
      r.counts[i * s_q + j] = kept;
      r.topk_length[i] = std::max(r.topk_length[i], kept);
    }
  }
  return r;
}

// Rows of global top-k positions of requests of length `len`: mostly positions in [0, len)
// with duplicates, padding and values no request has mixed in.
std::vector<int32_t> topk_positions(size_t n, int64_t len) {
  std::vector<int32_t> v = nasty_vec(n, 0, std::max<int64_t>(len - 1, 0));
  for (size_t e = 1; e < n; ++e)
    if (t::uniform_int(0, 7) == 0) v[e] = v[t::uniform_int(0, static_cast<int64_t>(e) - 1)];
  return v;
}

TEST(MetaDcpLocalTopk, MatchesNaive) {
  for (int N : {2, 4}) {
    for (int I : {1, 64}) {
      for (int64_t s_q : {1, 3}) {
        for (int iter = 0; iter < 6; ++iter) {
          const int page = static_cast<int>(std::vector<int>{1, 16, 64, 7}[t::uniform_int(0, 3)]);
          const int64_t b = t::uniform_int(1, 5), k = t::uniform_int(1, 80), len = t::uniform_int(1, 3000);
          // Often too few blocks for the rank's share of len; -1, INT32_MIN and huge entries too.
          const int64_t max_blocks = t::uniform_int(0, len / N / page + 2);
          const int64_t table_st = max_blocks + t::uniform_int(0, 3);
          std::vector<int32_t> table = nasty_vec(std::max<int64_t>(b * table_st, 1), 0, 5000);
          for (auto& e : table)
            if (t::uniform_int(0, 9) == 0) e = static_cast<int32_t>(INT32_MAX / page - t::uniform_int(-1, 1));
          // Strided rows (request and query-row strides past the packed ones).
          const int64_t st1 = k + t::uniform_int(0, 3), st0 = s_q * st1 + t::uniform_int(0, 5);
          std::vector<int32_t> pos = topk_positions(b * st0, len);
          const auto P = make_strided_view(pos.data(), DType::i32, {b, s_q, k}, {st0, st1, 1});
          const auto Bt = make_strided_view(table.data(), DType::i32, {b, max_blocks}, {table_st, 1});
          for (int rank = 0; rank < N; ++rank) {
            std::vector<int32_t> slots(b * s_q * k, kPoison32), counts(b * s_q, kPoison32), tl(b, kPoison32);
            dcp_local_topk(P, Bt, page, {N, I}, rank, view(slots, {b, s_q, k}), view(counts, {b, s_q}), view(tl, {b}));
            LocalTopk want = naive_local_topk(pos, st0, st1, table, table_st, b, s_q, k, max_blocks, page, N, I, rank);
            ASSERT_EQ(slots, want.slots) << "N " << N << " I " << I << " rank " << rank << " page " << page;
            ASSERT_EQ(counts, want.counts) << "N " << N << " I " << I << " rank " << rank;
            ASSERT_EQ(tl, want.topk_length) << "N " << N << " I " << I << " rank " << rank;
            // Without topk_length: the same slots and counts.
            std::vector<int32_t> slots2(b * s_q * k, kPoison32), counts2(b * s_q, kPoison32);
            dcp_local_topk(P, Bt, page, {N, I}, rank, view(slots2, {b, s_q, k}), view(counts2, {b, s_q}), TensorView{});
            ASSERT_EQ(slots2, want.slots);
            ASSERT_EQ(counts2, want.counts);
          }
        }
      }
    }
  }
}

TEST(MetaDcpLocalTopk, Example) {
  // N = 2, I = 2, page 4. Rank 0 holds positions 0 1 4 5 8 9 ... at local 0 1 2 3 4 5 ...,
  // rank 1 holds 2 3 6 7 10 11 ...; rank 0's table {7, 2}, rank 1's {3, -1}.
  std::vector<int32_t> pos{5, 0, 3, -1, 9, 2, 5, 100, INT32_MAX, 11,  // row 0
                           7, -5, 1, 1, 0, 0, 0, 0, 0, INT32_MIN};    // row 1
  std::vector<int32_t> table0{7, 2}, table1{3, -1};
  std::vector<int32_t> slots(20, kPoison32), counts(2, kPoison32), tl(1, kPoison32);
  dcp_local_topk(view(pos, {1, 2, 10}), view(table0, {1, 2}), 4, {2, 2}, 0, view(slots, {1, 2, 10}),
                 view(counts, {1, 2}), view(tl, {1}));
  // 5 -> local 3 -> 7*4+3; 0 -> 28; 9 -> local 5, block 1 -> 2*4+1; 5 again; 100 -> local 50,
  // block 12: past the table, dropped.
  EXPECT_EQ(slots, (std::vector<int32_t>{31, 28, 9, 31, -1, -1, -1, -1, -1, -1,  //
                                         29, 29, 28, 28, 28, 28, 28, -1, -1, -1}));
  EXPECT_EQ(counts, (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(tl, std::vector<int32_t>{7});
  dcp_local_topk(view(pos, {1, 2, 10}), view(table1, {1, 2}), 4, {2, 2}, 1, view(slots, {1, 2, 10}),
                 view(counts, {1, 2}), view(tl, {1}));
  // 3 -> local 1 -> 3*4+1; 2 -> 12; INT32_MAX: rank 1's, far past the table; 11 -> local 5,
  // block 1 whose entry is -1; 7 -> local 3 -> 15.
  EXPECT_EQ(slots, (std::vector<int32_t>{13, 12, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                         15, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(tl, std::vector<int32_t>{2});
}

TEST(MetaDcpLocalTopk, EveryKeyOnExactlyOneRank) {
  // Distinct positions of a length-len request, identity-like tables covering each rank's
  // share: the ranks' counts add up to the valid entries, and each slot leads back to its
  // position through the rank's table.
  for (int N : {2, 4}) {
    for (int I : {1, 64}) {
      const int page = 16;
      const int64_t len = t::uniform_int(1, 5000), k = 64;
      std::vector<int32_t> pos(k, -1);
      for (auto& p : pos)
        if (t::uniform_int(0, 4) != 0) p = static_cast<int32_t>(t::uniform_int(0, len - 1));
      std::sort(pos.begin(), pos.end());
      pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
      pos.resize(k, -1);
      int64_t total = 0, valid = std::count_if(pos.begin(), pos.end(), [](int32_t p) { return p >= 0; });
      for (int rank = 0; rank < N; ++rank) {
        const int64_t blocks = (dcp_local_length(len, {N, I}, rank) + page - 1) / page;
        std::vector<int32_t> table(std::max<int64_t>(blocks, 1));
        for (int64_t p = 0; p < blocks; ++p) table[p] = static_cast<int32_t>(blocks - 1 - p);  // reversed pages
        std::vector<int32_t> slots(k, kPoison32), counts(1, kPoison32), tl(1, kPoison32);
        dcp_local_topk(view(pos, {1, 1, k}), view(table, {1, blocks}), page, {N, I}, rank, view(slots, {1, 1, k}),
                       view(counts, {1, 1}), view(tl, {1}));
        int64_t next = 0;
        for (int32_t p : pos) {
          if (p < 0 || dcp_owner_rank(p, {N, I}) != rank) continue;
          const int64_t lp = dcp_local_position(p, {N, I});
          ASSERT_LT(lp, dcp_local_length(len, {N, I}, rank));
          ASSERT_EQ(slots[next++], table[lp / page] * page + lp % page) << "p " << p << " rank " << rank;
        }
        ASSERT_EQ(counts[0], next);
        ASSERT_EQ(tl[0], next);
        for (int64_t e = next; e < k; ++e) ASSERT_EQ(slots[e], -1);
        total += counts[0];
      }
      EXPECT_EQ(total, valid) << "N " << N << " I " << I;
    }
  }
}

TEST(MetaDcpLocalTopk, RankOwningNothing) {
  // Interleave 64: positions 0..63 all live on rank 0.
  const int64_t b = 2, s_q = 3, k = 40;
  std::vector<int32_t> pos(b * s_q * k), table(b * 4, 1);
  for (auto& p : pos) p = static_cast<int32_t>(t::uniform_int(-1, 63));
  for (int rank = 1; rank < 4; ++rank) {
    std::vector<int32_t> slots(b * s_q * k, kPoison32), counts(b * s_q, kPoison32), tl(b, kPoison32);
    dcp_local_topk(view(pos, {b, s_q, k}), view(table, {b, 4}), 16, {4, 64}, rank, view(slots, {b, s_q, k}),
                   view(counts, {b, s_q}), view(tl, {b}));
    EXPECT_EQ(slots, std::vector<int32_t>(b * s_q * k, -1)) << "rank " << rank;
    EXPECT_EQ(counts, std::vector<int32_t>(b * s_q, 0)) << "rank " << rank;
    EXPECT_EQ(tl, std::vector<int32_t>(b, 0)) << "rank " << rank;
  }
}

TEST(MetaDcpLocalTopk, ManyRequestsAndEmptyShapes) {
  // Large enough for the threaded host loop.
  const int64_t b = 64, s_q = 2, k = 2048, max_blocks = 300;
  std::vector<int32_t> pos = topk_positions(b * s_q * k, 4 * 64 * max_blocks);
  std::vector<int32_t> table = nasty_vec(b * max_blocks, 0, 1 << 20);
  std::vector<int32_t> slots(b * s_q * k, kPoison32), counts(b * s_q, kPoison32), tl(b, kPoison32);
  dcp_local_topk(view(pos, {b, s_q, k}), view(table, {b, max_blocks}), 64, {4, 1}, 2, view(slots, {b, s_q, k}),
                 view(counts, {b, s_q}), view(tl, {b}));
  LocalTopk want = naive_local_topk(pos, s_q * k, k, table, max_blocks, b, s_q, k, max_blocks, 64, 4, 1, 2);
  EXPECT_EQ(slots, want.slots);
  EXPECT_EQ(counts, want.counts);
  EXPECT_EQ(tl, want.topk_length);
  // No rows or no entries: counts and topk_length 0; no requests: nothing to write.
  std::vector<int32_t> in_none, out_none, tl0(3, kPoison32), counts0(3 * 2, kPoison32), table3(3 * 2, 1);
  dcp_local_topk(view(in_none, {3, 0, 5}), view(table3, {3, 2}), 4, {2, 1}, 0, view(out_none, {3, 0, 5}),
                 view(counts0, {3, 0}), view(tl0, {3}));
  EXPECT_EQ(tl0, std::vector<int32_t>(3, 0));
  std::fill(tl0.begin(), tl0.end(), kPoison32);
  dcp_local_topk(view(in_none, {3, 2, 0}), view(table3, {3, 2}), 4, {2, 1}, 0, view(out_none, {3, 2, 0}),
                 view(counts0, {3, 2}), view(tl0, {3}));
  EXPECT_EQ(counts0, std::vector<int32_t>(6, 0));
  EXPECT_EQ(tl0, std::vector<int32_t>(3, 0));
  dcp_local_topk(view(in_none, {0, 2, 4}), view(in_none, {0, 2}), 4, {2, 1}, 1, view(out_none, {0, 2, 4}),
                 view(counts0, {0, 2}), view(tl0, {0}));
}

TEST(MetaDcpLocalTopk, Rejects) {
  const int64_t b = 2, s_q = 3, k = 4;
  std::vector<int32_t> pos(b * s_q * k, 1), table(b * 5, 0), slots(b * s_q * k + 8, kPoison32),
      counts(b * s_q + 8, kPoison32), tl(b + 8, kPoison32), table3(3 * 5, 0);
  std::vector<int64_t> pos64(b * s_q * k, 1), tl64(b, 0);
  const auto P = view(pos, {b, s_q, k});
  const auto Bt = view(table, {b, 5});
  const auto S = view(slots, {b, s_q, k});
  const auto C = view(counts, {b, s_q});
  const auto L = view(tl, {b});
  const DcpLayout d{2, 64};
  const std::vector<t::Watched> outs{t::watch("slots", slots), t::watch("counts", counts), t::watch("topk_length", tl)};
  auto rejected = [&](const std::function<void()>& call, const std::vector<std::string>& fragments) {
    t::expect_rejected_untouched({call}, fragments, outs);
  };
  rejected([&] { dcp_local_topk(view(pos64, {b, s_q, k}), Bt, 16, d, 0, S, C, L); },
           {"positions must be int32 of shape (*, *, *)", "got int64 (2, 3, 4)"});
  rejected([&] { dcp_local_topk(view(pos, {b * s_q, k}), Bt, 16, d, 0, S, C, L); },
           {"positions must be int32 of shape (*, *, *)", "got int32 (6, 4)"});
  rejected([&] { dcp_local_topk(P, view(table, {b * 5}), 16, d, 0, S, C, L); },
           {"block_table must be int32 of shape (*, *)", "got int32 (10,)"});
  // A request-count mismatch names the shorter argument, whichever it is.
  rejected([&] { dcp_local_topk(P, view(table3, {3, 5}), 16, d, 0, S, C, L); },
           {"positions must be int32 of shape (3, *, *)", "got int32 (2, 3, 4)"});
  rejected([&] { dcp_local_topk(P, view(table, {1, 5}), 16, d, 0, S, C, L); },
           {"block_table must be int32 of shape (2, *)", "got int32 (1, 5)"});
  rejected([&] { dcp_local_topk(P, Bt, 0, d, 0, S, C, L); }, {"page_size must be at least 1", "got 0"});
  rejected([&] { dcp_local_topk(P, Bt, 16, {0, 64}, 0, S, C, L); }, {"DcpLayout.world must be at least 1", "got 0"});
  rejected([&] { dcp_local_topk(P, Bt, 16, {2, -1}, 0, S, C, L); },
           {"DcpLayout.interleave must be at least 1", "got -1"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 2, S, C, L); }, {"rank must be between 0 and world - 1 = 1", "got 2"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, -1, S, C, L); }, {"rank must be between 0 and world - 1 = 1", "got -1"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, view(slots, {b, s_q, k + 1}), C, L); },
           {"slots must be int32 of shape (2, 3, 4)", "got int32 (2, 3, 5)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, TensorView{}, C, L); },
           {"slots must be int32 of shape (2, 3, 4)", "got nothing"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, view(counts, {b, s_q + 1}), L); },
           {"counts must be int32 of shape (2, 3)", "got int32 (2, 4)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, view(counts, {b * s_q}), L); },
           {"counts must be int32 of shape (2, 3)", "got int32 (6,)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, C, view(tl, {b + 1})); },
           {"topk_length must be int32 of shape (2,)", "got int32 (3,)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, C, view(tl64, {b})); },
           {"topk_length must be int32 of shape (2,)", "got int64 (2,)"});
  rejected([&] { dcp_local_topk(P, view(table, {b, 5}, cuda_device(0)), 16, d, 0, S, C, L); },
           {"block_table must be on cpu like positions", "got on cuda:0"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, view(counts, {b, s_q}, cuda_device(0)), L); },
           {"counts must be on cpu like positions", "got on cuda:0"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, C, view(tl, {b}, cuda_device(1))); },
           {"topk_length must be on cpu like positions", "got on cuda:1"});
  rejected([&] { dcp_local_topk(make_strided_view(pos.data(), DType::i32, {b, s_q, 2}, {12, 4, 2}), Bt, 16, d, 0,
                                view(slots, {b, s_q, 2}), view(counts, {b, s_q}), L); },
           {"positions must be a tensor with its last dimension contiguous", "got strides (12, 4, 2)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, make_strided_view(slots.data(), DType::i32, {b, s_q, k}, {16, 5, 1}),
                                C, L); },
           {"slots must be a tensor with its last 3 dimensions packed row-major", "got strides (16, 5, 1)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, make_strided_view(counts.data(), DType::i32, {b, s_q}, {4, 1}),
                                L); },
           {"counts must be a tensor with its last 2 dimensions packed row-major", "got strides (4, 1)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, C, make_strided_view(tl.data(), DType::i32, {b}, {2})); },
           {"topk_length must be a tensor with its last", "got strides (2,)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, make_view(slots.data(), DType::i32, {b, s_q}), C, L); },
           {"slots must be int32 of shape (2, 3, 4)", "got int32 (2, 3)"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, make_view(slots.data(), DType::i32, {b, s_q}), L); },
           {"counts must be a buffer distinct from slots", "got the same data pointer"});
  rejected([&] { dcp_local_topk(P, Bt, 16, d, 0, S, C, make_view(counts.data(), DType::i32, {b})); },
           {"topk_length must be a buffer distinct from counts", "got the same data pointer"});
  // An output on an input's memory: the input is what a write would damage.
  std::vector<int32_t> pos_before = pos;
  t::expect_error([&] { dcp_local_topk(P, Bt, 16, d, 0, view(pos, {b, s_q, k}), C, L); },
                  {"slots must be a buffer distinct from positions", "got the same data pointer"});
  t::expect_error([&] { dcp_local_topk(P, Bt, 16, d, 0, S, view(table, {b, s_q}), L); },
                  {"counts must be a buffer distinct from block_table", "got the same data pointer"});
  EXPECT_EQ(pos, pos_before);
  EXPECT_EQ(table, std::vector<int32_t>(b * 5, 0));
}

// ------------------------------------------------------------------ decode split schedule

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

TEST(MetaSplitSchedule, BoundCoverageAndFormula) {
  for (int iter = 0; iter < 300; ++iter) {
    SplitSchedulePlan plan;
    plan.num_units = static_cast<int>(t::uniform_int(1, 264));
    plan.block_n = static_cast<int>(std::vector<int>{1, 7, 64, 128}[t::uniform_int(0, 3)]);
    plan.max_keys = static_cast<int>(std::vector<int64_t>{0, 1, 100, 5000, 131072, INT32_MAX}[t::uniform_int(0, 5)]);
    const int64_t b = t::uniform_int(0, 300);
    std::vector<int32_t> lens = nasty_vec(b, 0, std::min<int64_t>(2 * int64_t{plan.max_keys} + 1, INT32_MAX));
    std::vector<int32_t> off(b + 1, kPoison32);
    decode_split_schedule(view(lens, {b}), plan, view(off, {b + 1}));

    std::vector<int64_t> blocks(b);
    int64_t total = 0;
    for (int64_t i = 0; i < b; ++i) {
      int64_t len = std::min<int64_t>(std::max<int64_t>(lens[i], 0), plan.max_keys);
      blocks[i] = ceil_div(len, plan.block_n);
      total += blocks[i] + 1;
    }
    const int64_t per_unit = std::max<int64_t>(1, ceil_div(total, plan.num_units));
    ASSERT_EQ(off[0], 0);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t n = int64_t{off[i + 1]} - off[i];
      ASSERT_GE(n, 1) << "request " << i;
      ASSERT_EQ(n, std::max<int64_t>(1, ceil_div(blocks[i], per_unit))) << "request " << i;
      // Split j covers [j*c, min((j+1)*c, blocks)): consecutive, non-empty, ending at blocks.
      const int64_t c = ceil_div(blocks[i], n);
      int64_t covered = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t begin = std::min(j * c, blocks[i]), end = std::min((j + 1) * c, blocks[i]);
        ASSERT_EQ(begin, covered);
        if (blocks[i] > 0) ASSERT_LT(begin, end) << "empty split " << j << " of request " << i;
        covered = end;
      }
      ASSERT_EQ(covered, blocks[i]);
    }
    ASSERT_LE(off[b], max_total_splits(b, plan.num_units)) << "b " << b << " units " << plan.num_units;
  }
}

TEST(MetaSplitSchedule, WorstCaseStaysWithinBound) {
  // Every request at the longest length: the bound b + num_units must still hold.
  for (int units : {1, 3, 132, 264}) {
    for (int64_t b : {1, 2, 7, 131, 133, 1000}) {
      SplitSchedulePlan plan{units, 1, INT32_MAX};
      std::vector<int32_t> lens(b, INT32_MAX), off(b + 1, kPoison32);
      decode_split_schedule(view(lens, {b}), plan, view(off, {b + 1}));
      ASSERT_LE(off[b], max_total_splits(b, units));
      ASSERT_GE(off[b], b);
    }
  }
}

TEST(MetaSplitSchedule, Example) {
  // Blocks {0, 1, 10, 100}: total 115, 4 units -> 29 blocks per split -> 1, 1, 1, 4 splits.
  std::vector<int32_t> lens{0, 64, 640, 6400}, off(5, kPoison32);
  decode_split_schedule(view(lens, {4}), SplitSchedulePlan{4, 64, 1 << 20}, view(off, {5}));
  EXPECT_EQ(off, (std::vector<int32_t>{0, 1, 2, 3, 7}));
  // max_keys clamps: every request becomes 1 block.
  decode_split_schedule(view(lens, {4}), SplitSchedulePlan{4, 64, 64}, view(off, {5}));
  EXPECT_EQ(off, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  std::vector<int32_t> none, off0{kPoison32};
  decode_split_schedule(view(none, {0}), SplitSchedulePlan{}, view(off0, {1}));
  EXPECT_EQ(off0, std::vector<int32_t>{0});
}

// A floor on the blocks per split (dense decode on the sm_90a family) keeps every split
// non-empty and the total within b + num_units, and sets the b = 1 schedule it was chosen for.
TEST(MetaSplitSchedule, FloorOnBlocksPerSplitKeepsTheBound) {
  for (int round = 0; round < 200; ++round) {
    const int64_t b = t::uniform_int(1, 40), units = t::uniform_int(1, 300), floor = t::uniform_int(1, 8);
    std::vector<int64_t> blocks(b);
    int64_t total = 0;
    for (auto& k : blocks) total += (k = t::uniform_int(0, 600)) + 1;
    const int64_t per_unit = meta::split_per_unit_at_least(total, units, floor);
    ASSERT_GE(per_unit, floor);
    ASSERT_GE(per_unit, meta::split_per_unit(total, units));
    int64_t sum = 0;
    for (int64_t k : blocks) {
      const int64_t n = meta::split_count(k, per_unit), c = meta::split_chunk(k, n);
      if (k > 0) ASSERT_LT((n - 1) * c, k) << "empty last split";
      sum += n;
    }
    ASSERT_LE(sum, max_total_splits(b, static_cast<int>(units))) << "b " << b << " units " << units;
  }
  // b = 1, 8192 keys in 128 blocks, 66 units (h128 on 132 SMs): 66 splits of 2 blocks without
  // the floor, 32 splits of 4 with it.
  EXPECT_EQ(meta::split_count(128, meta::split_per_unit(129, 66)), 64);
  EXPECT_EQ(meta::split_count(128, meta::split_per_unit_at_least(129, 66, 4)), 32);
  EXPECT_EQ(meta::split_per_unit_at_least(16512, 66, 4), 251);  // b = 128: no change
}

// Two warpgroups on alternate blocks: an odd chunk from 5 on becomes one block shorter (one more
// split a request) where the splits still fit the workspace and one wave; 3 and even chunks stay.
TEST(MetaSplitSchedule, AlternatingWarpgroupsShortenOddChunks) {
  // V3.2 topk 2048 (32 blocks), 16-row tiles on 132 SMs
  EXPECT_EQ(meta::split_per_unit_alternating(5, 32, 2, 18, 8, 132), 4);   // b2 h128: 7 splits of 5 -> 8 of 4
  EXPECT_EQ(meta::split_per_unit_alternating(5, 32, 1, 9, 16, 132), 4);   // b1 s_q2 h128
  EXPECT_EQ(meta::split_per_unit_alternating(3, 32, 1, 17, 8, 132), 3);   // b1 h128: 11 splits of 3 stay
  EXPECT_EQ(meta::split_per_unit_alternating(4, 32, 4, 37, 4, 132), 4);   // b4 h64: even
  EXPECT_EQ(meta::split_per_unit_alternating(5, 32, 2, 18, 8, 120), 5);   // 128 CTAs: past one wave
  EXPECT_EQ(meta::split_per_unit_alternating(5, 32, 2, 15, 8, 132), 5);   // 16 splits: past the workspace
  EXPECT_EQ(meta::split_per_unit_alternating(6, 31, 1, 17, 8, 132), 6);   // chunk 6 (31 blocks in 6)
  EXPECT_EQ(meta::split_per_unit_alternating(7, 32, 1, 17, 8, 132), 6);   // chunk 7 (5 splits) -> 6 (6)
  EXPECT_EQ(meta::split_per_unit_alternating(5, 0, 1, 17, 8, 132), 5);    // no keys
  for (int round = 0; round < 500; ++round) {
    const int64_t b = t::uniform_int(1, 8), blocks = t::uniform_int(0, 200), per_unit = t::uniform_int(1, 12);
    const int64_t max_splits = t::uniform_int(1, 200), cps = t::uniform_int(1, 32), slots = t::uniform_int(1, 264);
    const int64_t got = meta::split_per_unit_alternating(per_unit, blocks, b, max_splits, cps, slots);
    const int64_t c = meta::split_chunk(blocks, meta::split_count(blocks, per_unit));
    if (got == per_unit) {
      if (c >= 5 && c % 2 == 1) {  // kept only where the shorter splits do not fit
        const int64_t n = meta::split_count(blocks, c - 1);
        ASSERT_TRUE(b * n > max_splits || b * n * cps > slots) << blocks << " " << per_unit;
      }
      continue;
    }
    ASSERT_TRUE(c >= 5 && c % 2 == 1) << "changed an even or short chunk: " << blocks << " " << per_unit;
    ASSERT_EQ(got, c - 1);
    const int64_t n = meta::split_count(blocks, got), c2 = meta::split_chunk(blocks, n);
    ASSERT_LE(b * n, max_splits);
    ASSERT_LE(b * n * cps, slots);
    ASSERT_LT(c2, c);  // warpgroup 0's blocks: ceil(c2 / 2) < ceil(c / 2)
    ASSERT_LT((n - 1) * c2, blocks) << "empty last split";
  }
}

// The persistent walk's last round (sparse prefill's tail split): its units split into as many
// parts as the idle CTAs hold, at most a unit's blocks, and only within one head tile.
TEST(MetaSplitSchedule, TailSplitParts) {
  EXPECT_EQ(meta::tail_split_parts(4096, 132, 4096, 8), 8);    // d512 h64 k512: 4 tail units
  EXPECT_EQ(meta::tail_split_parts(8192, 132, 4096, 32), 16);  // h128 k2048: 8 in the second tile
  EXPECT_EQ(meta::tail_split_parts(8192, 132, 4096, 16), 16);
  EXPECT_EQ(meta::tail_split_parts(4092, 132, 4092, 8), 0);    // whole rounds
  EXPECT_EQ(meta::tail_split_parts(132, 132, 132, 8), 0);      // one round
  EXPECT_EQ(meta::tail_split_parts(100, 132, 100, 8), 0);
  EXPECT_EQ(meta::tail_split_parts(4096, 132, 4096, 1), 0);    // one-block units
  EXPECT_EQ(meta::tail_split_parts(200, 132, 200, 8), 0);      // 68 tail units: one part each
  EXPECT_EQ(meta::tail_split_parts(140, 132, 2, 8), 0);        // 8 tail units across 4 head tiles
  EXPECT_EQ(meta::tail_split_parts(140, 132, 70, 6), 6);
  EXPECT_EQ(meta::tail_split_parts(140, 0, 140, 6), 0);
  // Every part of a unit of `blocks` blocks covers its share once, none past the unit.
  for (int64_t blocks = 0; blocks <= 40; ++blocks)
    for (int64_t parts = 2; parts <= 33; ++parts) {
      const int64_t chunk = meta::split_chunk(blocks, parts);
      int64_t covered = 0;
      for (int64_t j = 0; j < parts; ++j) {
        const int64_t b = meta::split_begin(j, chunk, blocks), e = meta::split_end(j, chunk, blocks);
        ASSERT_LE(b, e);
        ASSERT_EQ(b, std::min(covered, blocks));
        covered = std::max(covered, e);
      }
      ASSERT_EQ(covered, blocks) << blocks << " blocks in " << parts << " parts";
    }
}

// The persistent walk with its tail split, as the prefill kernel walks it (kernel.cuh work_of)
// and the launch plans it (launch.cu prefill_tail_split): every key block of every unit once;
// a tail part's unit is a token of the last head tile, its split slot names the combine's
// request (token - first_token) and part, inside the workspace's rows; and no CTA's share
// exceeds the complete rounds' blocks by more than one part.
TEST(MetaSplitSchedule, TailWalkCoversEveryBlockOnce) {
  struct Case {
    int64_t tokens, tiles, slots, blocks;
  };
  const Case cases[] = {{4096, 1, 132, 8},  {4096, 2, 132, 16}, {4096, 2, 132, 32}, {140, 1, 132, 4},
                        {70, 2, 132, 6},    {140, 1, 132, 16},  {133, 1, 132, 3},   {200, 1, 132, 8},
                        {4092, 1, 132, 8},  {100, 1, 132, 8},   {1000, 3, 78, 5},   {67, 2, 66, 40},
                        {4096, 1, 132, 1},  {9, 1, 8, 100}};
  int64_t split_cases = 0;
  for (const Case& c : cases) {
    const int64_t units = c.tokens * c.tiles;
    const int64_t ctas = std::min(units, c.slots);
    const int64_t parts = meta::tail_split_parts(units, c.slots, c.tokens, c.blocks);
    const int64_t whole = parts > 1 ? meta::tail_walk_whole(units, ctas) : units;
    const int64_t steps = parts > 1 ? meta::tail_walk_steps(units, ctas, parts) : units;
    const int64_t tail = units - meta::tail_walk_whole(units, c.slots), first_token = c.tokens - tail;  // launch.cu's plan
    split_cases += parts > 1;
    std::vector<int> seen(static_cast<size_t>(units * c.blocks), 0);
    int64_t most = 0;
    for (int64_t cta = 0; cta < ctas; ++cta) {
      int64_t share = 0;
      for (int64_t u = cta; u < steps; u += ctas) {
        const meta::TailStep<int64_t> st = parts > 1 ? meta::tail_step(u, whole, parts) : meta::TailStep<int64_t>{u, -1, 0};
        ASSERT_GE(st.unit, 0);
        ASSERT_LT(st.unit, units);
        int64_t b = 0, e = c.blocks;
        if (st.part >= 0) {
          const int64_t chunk = meta::split_chunk(c.blocks, parts);
          b = meta::split_begin(st.part, chunk, c.blocks);
          e = meta::split_end(st.part, chunk, c.blocks);
          ASSERT_EQ(st.unit / c.tokens, c.tiles - 1) << "a tail unit outside the last head tile";
          ASSERT_EQ(st.unit % c.tokens - first_token, st.slot / parts) << "combine request of the part";
          ASSERT_EQ(st.part, st.slot % parts);
          ASSERT_LT(st.slot, tail * parts) << "partial rows past the workspace";
        }
        for (int64_t k = b; k < e; ++k) ++seen[static_cast<size_t>(st.unit * c.blocks + k)];
        share += e - b;
      }
      most = std::max(most, share);
    }
    for (size_t i = 0; i < seen.size(); ++i)
      ASSERT_EQ(seen[i], 1) << "unit " << i / c.blocks << " block " << i % c.blocks << ", case " << c.tokens << "x"
                            << c.tiles << " on " << c.slots;
    const int64_t rounds = units / ctas;
    if (parts > 1)
      EXPECT_LE(most, rounds * c.blocks + meta::split_chunk(c.blocks, parts)) << c.tokens << "x" << c.tiles;
    else
      EXPECT_EQ(most, meta::ceil_div(units, ctas) * c.blocks);
  }
  EXPECT_GE(split_cases, 7);  // the table's rows and the GPU test's shapes split
}

// The launch's unit count: one split per request once the requests cover all but a sixteenth
// of the units.
TEST(MetaSplitSchedule, UnitsAtFullOccupancy) {
  EXPECT_EQ(meta::split_units(128, 132), 128);
  EXPECT_EQ(meta::split_units(124, 132), 124);  // 8 idle of 132: 16 * 8 <= 132
  EXPECT_EQ(meta::split_units(123, 132), 132);  // 9 idle: split
  EXPECT_EQ(meta::split_units(132, 132), 132);
  EXPECT_EQ(meta::split_units(133, 132), 132);
  EXPECT_EQ(meta::split_units(64, 66), 64);
  EXPECT_EQ(meta::split_units(1, 132), 132);
  EXPECT_EQ(meta::split_units(1, 1), 1);
  EXPECT_EQ(meta::split_units(0, 132), 132);
}

TEST(MetaSplitSchedule, Rejects) {
  EXPECT_EQ(max_total_splits(3, 132), 135);
  EXPECT_EQ(max_total_splits(0, 1), 1);
  t::expect_error([] { max_total_splits(-1, 4); }, {"batch must be at least 0", "got -1"});
  t::expect_error([] { max_total_splits(2, 0); }, {"num_units must be at least 1", "got 0"});
  std::vector<int32_t> lens{5, 6}, off(3, kPoison32);
  std::vector<int64_t> lens64{5, 6};
  auto L = view(lens, {2});
  auto O = view(off, {3});
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{0, 64, 100}, O); },
                  {"plan.num_units must be at least 1", "got 0"}, off);
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{4, 0, 100}, O); },
                  {"plan.block_n must be at least 1", "got 0"}, off);
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{4, 64, -1}, O); },
                  {"plan.max_keys must be at least 0", "got -1"}, off);
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{INT32_MAX, 64, 100}, O); },
                  {"plan.num_units must be at most 2147483647 - b = 2147483645", "got 2147483647"}, off);
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{}, make_view(off.data(), DType::i32, {2})); },
                  {"split_offsets must be int32 of shape (3,)", "got int32 (2,)"}, off);
  expect_rejected([&] { decode_split_schedule(view(lens64, {2}), SplitSchedulePlan{}, O); },
                  {"lengths must be int32 of shape (*,)", "got int64 (2,)"}, off);
  expect_rejected([&] { decode_split_schedule(L, SplitSchedulePlan{}, view(off, {3}, cuda_device(0))); },
                  {"split_offsets must be on cpu like lengths", "got on cuda:0"}, off);
}

// ------------------------------------------------------------------------- dispatch

TEST(MetaDispatch, CudaTensorsNeedACudaBuild) {
  if (built_with_cuda()) GTEST_SKIP() << "CUDA build: covered by the GPU tests";
  std::vector<int32_t> pos{1, 2}, out(2 * 3, kPoison32);
  auto before = t::snapshot(out);
  EXPECT_THROW(sliding_window_indices(view(pos, {2}, cuda_device(0)), 3, view(out, {2, 3}, cuda_device(0))),
               RuntimeError);
  EXPECT_EQ(t::snapshot(out), before);
}

}  // namespace
}  // namespace smla
