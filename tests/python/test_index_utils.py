"""The index utilities against plain-Python versions of SPEC §4.6 / docs/METADATA.md, fed
nonsense values too (each must give -1 or a clamped value, never fail)."""

import math

import pytest
import torch

import smla

I32 = torch.int32


def t(values, dtype=I32, device="cpu"):
    return torch.tensor(values, dtype=dtype, device=device)


def test_req_id_per_token(device):
    for qsl in ([0, 3, 3, 7], [2, 4, 9], [0, 5, 2, 8]):  # sorted, starting late, unsorted/overlapping
        T = 10
        exp = []
        for tok in range(T):
            r = next((r for r in range(len(qsl) - 1) if qsl[r] <= tok < qsl[r + 1]), -1)
            exp.append(r)
        out = smla.req_id_per_token(t(qsl, device=device), T)
        assert out.dtype == I32 and out.tolist() == exp, qsl
    out = torch.full((4,), 99, dtype=I32, device=device)
    assert smla.req_id_per_token(t([0, 2, 4], device=device), out=out) is out
    assert out.tolist() == [0, 0, 1, 1]


def test_page_table_from_req_to_token(device):
    page = 4
    R, C = 3, 13
    r2t = torch.randint(0, 50, (R, C), dtype=I32) * page + torch.randint(0, page, (R, C), dtype=I32)
    r2t[1, 4] = -5  # a negative token slot gives -1, not page 0
    rpi = [2, 1, 0, 7, -1]
    lens = [13, 9, 0, 5, 4]
    bt = smla.page_table_from_req_to_token(r2t.to(device), t(rpi, device=device), t(lens, device=device), page)
    P = math.ceil(C / page)
    assert bt.shape == (5, P) and bt.dtype == I32
    for i in range(5):
        for p in range(P):
            r = rpi[i]
            ok = 0 <= r < R and p < math.ceil(max(lens[i], 0) / page) and p * page < C
            v = int(r2t[r, p * page]) if ok else -1
            exp = v // page if ok and v >= 0 else -1
            assert int(bt[i, p]) == exp, (i, p)


def test_positions_to_slots(device):
    page = 16
    bt = t([[3, 7, -1], [0, 2, 5]], device=device)
    rid = t([0, 1, 1, 5, -1], device=device)
    pos = t([[0, 17, 40, -1], [33, 15, 48, 2], [1 << 30, 0, 1, 2], [0, 0, 0, 0], [0, 1, 2, 3]], device=device)
    out = smla.positions_to_slots(bt, page, rid, pos)
    exp = []
    for i in range(5):
        row = []
        for p in pos[i].tolist():
            r = int(rid[i])
            if not 0 <= r < 2 or p < 0 or p // page >= 3 or int(bt[r, p // page]) < 0:
                row.append(-1)
            else:
                row.append(int(bt[r, p // page]) * page + p % page)
        exp.append(row)
    assert out.tolist() == exp
    flat = smla.positions_to_slots(bt, page, rid[:2], t([17, 33], device=device))  # [T] positions
    assert flat.tolist() == [7 * 16 + 1, 5 * 16 + 1]


def test_sliding_window_indices(device):
    W = 5
    pos = [0, 3, 10, -2]
    out = smla.sliding_window_indices(t(pos, device=device), W)
    assert out.shape == (4, W)
    for i, p in enumerate(pos):
        exp = list(range(max(p - W + 1, 0), p + 1)) if p >= 0 else []
        assert out[i].tolist() == exp + [-1] * (W - len(exp))


def test_compressed_slot_mapping(device):
    R, spp = 4, 8
    bt = t([[2, 0], [1, -1]], device=device)
    pos = [3, 7, 5, 35, 63, 67, -1, 2 ** 62 - 1, 11]
    rid = [0, 0, 0, 0, 1, 1, 0, 0, 9]
    out = smla.compressed_slot_mapping(t(pos, torch.int64, device), t(rid, device=device), bt, R, spp)
    assert out.dtype == torch.int64
    exp = []
    for p, r in zip(pos, rid):
        c = p // R
        if p < 0 or (p + 1) % R or not 0 <= r < 2 or c // spp >= 2 or int(bt[r, c // spp]) < 0:
            exp.append(-1)
        else:
            exp.append(int(bt[r, c // spp]) * spp + c % spp)
    assert out.tolist() == exp


@pytest.mark.parametrize("world,interleave", [(1, 1), (4, 1), (2, 16), (3, 8)])
def test_dcp(device, world, interleave):
    lens = [0, 1, 7, 64, 100, 1000, -5]
    for rank in range(world):
        out = smla.dcp_local_seqlens(t(lens, device=device), world=world, rank=rank, interleave=interleave)
        exp = []
        for L in lens:
            L = max(L, 0)
            base = L // interleave // world * interleave
            exp.append(base + min(max(L - base * world - rank * interleave, 0), interleave))
        assert out.tolist() == exp
        assert [smla.dcp_local_length(L, world, rank, interleave) for L in lens] == exp
    # every token lands on exactly one rank, at a position below that rank's length
    L = 77
    counts = [0] * world
    for p in range(L):
        r = smla.dcp_owner_rank(p, world, interleave)
        assert r == (p // interleave) % world
        assert smla.dcp_local_position(p, world, interleave) == (p // (interleave * world)) * interleave + p % interleave
        counts[r] += 1
    assert counts == [smla.dcp_local_length(L, world, r, interleave) for r in range(world)]
    assert smla.dcp_owner_rank(-1, world, interleave) == -1


def test_decode_split_schedule(device):
    lengths = [0, 5000, 64, 130, 99999, -4]
    num_units, block_n, max_keys = 16, 64, 8192
    out = smla.decode_split_schedule(t(lengths, device=device), max_keys=max_keys, num_units=num_units,
                                     block_n=block_n)
    blocks = [math.ceil(min(max(L, 0), max_keys) / block_n) for L in lengths]
    total = sum(x + 1 for x in blocks)
    per_unit = max(1, math.ceil(total / num_units))
    n = [max(1, math.ceil(x / per_unit)) for x in blocks]
    exp = [0]
    for v in n:
        exp.append(exp[-1] + v)
    assert out.tolist() == exp
    assert exp[-1] <= smla.max_total_splits(len(lengths), num_units) == len(lengths) + num_units


def dcp_local_topk_ref(positions, block_table, page_size, world, interleave, rank):
    """The rule of SPEC §4.6, row by row: owned positions with a slot, in order, then -1."""
    b, s_q, k = positions.shape
    slots, counts = [], []
    for i in range(b):
        table = block_table[i].tolist()
        req_slots, req_counts = [], []
        for row in positions[i].tolist():
            kept = []
            for p in row:
                if p < 0 or (p // interleave) % world != rank:
                    continue
                lp = p // (interleave * world) * interleave + p % interleave
                blk = lp // page_size
                if blk >= len(table) or table[blk] < 0 or table[blk] * page_size + lp % page_size > 2 ** 31 - 1:
                    continue
                kept.append(table[blk] * page_size + lp % page_size)
            req_slots.append(kept + [-1] * (k - len(kept)))
            req_counts.append(len(kept))
        slots.append(req_slots)
        counts.append(req_counts)
    return slots, counts, [max(c, default=0) for c in counts]


@pytest.mark.parametrize("world,interleave,s_q", [(2, 1, 1), (4, 64, 3), (2, 64, 3), (4, 1, 1)])
def test_dcp_local_topk(device, world, interleave, s_q):
    b, k, page, length = 3, 50, 16, 3000
    positions = torch.randint(-2, length, (b, s_q, k), dtype=I32)
    positions[0, 0, :4] = torch.tensor([2 ** 31 - 1, -(2 ** 31), -1, 10 ** 9], dtype=I32)
    positions[1, -1, 5:9] = positions[1, -1, 0]  # duplicates are kept as they are
    max_blocks = length // world // page // 2  # too few blocks for the rank's share
    block_table = torch.randint(-1, 500, (b, max_blocks), dtype=I32)
    block_table[2, 0] = 2 ** 31 // page  # slots past INT32_MAX
    for rank in range(world):
        slots, counts, topk_length = smla.dcp_local_topk(positions.to(device), block_table.to(device), page,
                                                         world=world, rank=rank, interleave=interleave)
        assert slots.dtype == counts.dtype == topk_length.dtype == I32
        assert slots.device.type == counts.device.type == topk_length.device.type == device
        want = dcp_local_topk_ref(positions, block_table, page, world, interleave, rank)
        assert (slots.tolist(), counts.tolist(), topk_length.tolist()) == want, rank
    # Strided positions (a slice of a wider buffer), into given outputs, without topk_length.
    wide = torch.randint(-1, length, (b, s_q, k + 7), dtype=I32)
    out = (torch.full((b, s_q, k), 99, dtype=I32, device=device), torch.full((b, s_q), 99, dtype=I32, device=device),
           None)
    got = smla.dcp_local_topk(wide.to(device)[..., 3:k + 3], block_table.to(device), page, world=world, rank=0,
                              interleave=interleave, out=out)
    assert got[0] is out[0] and got[1] is out[1] and got[2] is None
    want = dcp_local_topk_ref(wide[..., 3:k + 3], block_table, page, world, interleave, 0)
    assert (out[0].tolist(), out[1].tolist()) == want[:2]


def test_dcp_local_topk_rank_owning_nothing(device):
    # Interleave 64: request 0's positions all live on rank 0, so rank 1 gets -1, 0 and 0.
    positions = t([[[0, 5, 63, -1]], [[64, 65, 130, 1]]], device=device)
    block_table = t([[4, 5], [6, 7]], device=device)
    slots, counts, topk_length = smla.dcp_local_topk(positions, block_table, 64, world=2, rank=1, interleave=64)
    assert slots.tolist() == [[[-1, -1, -1, -1]], [[6 * 64, 6 * 64 + 1, -1, -1]]]
    assert counts.tolist() == [[0], [2]] and topk_length.tolist() == [0, 2]


def test_dcp_local_topk_errors(device):
    pos = torch.zeros(2, 1, 4, dtype=I32, device=device)
    bt = torch.zeros(2, 3, dtype=I32, device=device)
    slots = torch.full((2, 1, 4), 7, dtype=I32, device=device)
    counts = torch.full((2, 1), 7, dtype=I32, device=device)
    tl = torch.full((2,), 7, dtype=I32, device=device)
    cases = [
        (lambda: smla.dcp_local_topk(pos, bt, 16, world=2, rank=2, out=(slots, counts, tl)),
         "rank must be between 0 and world - 1 = 1, got 2"),
        (lambda: smla.dcp_local_topk(pos, bt, 0, world=2, rank=0, out=(slots, counts, tl)),
         "page_size must be at least 1, got 0"),
        (lambda: smla.dcp_local_topk(pos.long(), bt, 16, world=2, rank=0, out=(slots, counts, tl)),
         "positions must be int32 of shape (*, *, *), got int64 (2, 1, 4)"),
        (lambda: smla.dcp_local_topk(pos[:, 0], bt, 16, world=2, rank=0, out=(slots, counts, tl)),
         "positions must be int32 of shape (*, *, *), got int32 (2, 4)"),
        (lambda: smla.dcp_local_topk(pos, bt[:1], 16, world=2, rank=0, out=(slots, counts, tl)),
         "block_table must be int32 of shape (2, *), got int32 (1, 3)"),
        (lambda: smla.dcp_local_topk(pos, bt, 16, world=2, rank=0, out=(slots, counts[:, :0], tl)),
         "counts must be int32 of shape (2, 1), got int32 (2, 0)"),
        (lambda: smla.dcp_local_topk(pos, bt, 16, world=2, rank=0, out=(slots, counts, tl[:1])),
         "topk_length must be int32 of shape (2,), got int32 (1,)"),
        (lambda: smla.dcp_local_topk(pos, bt, 16, world=2, rank=0, out=(slots, counts)),
         "out must be a (slots, counts, topk_length) tuple, got a tuple of 2"),
    ]
    for call, message in cases:
        with pytest.raises(smla.SmlaError) as info:
            call()
        assert message in str(info.value)
        assert (slots == 7).all() and (counts == 7).all() and (tl == 7).all(), message
    # The wrapper's allocation for a malformed positions still lets the core name it.
    with pytest.raises(smla.SmlaError, match=r"positions must be int32 of shape \(\*, \*, \*\)"):
        smla.dcp_local_topk(pos[0, 0], bt, 16, world=2, rank=0)


def test_dcp_local_topk_opcheck():
    pos = torch.randint(-1, 200, (2, 3, 40), dtype=I32)
    bt = torch.randint(-1, 20, (2, 4), dtype=I32)
    for tl in (torch.empty(2, dtype=I32), None):
        args = (pos, bt, torch.empty(2, 3, 40, dtype=I32), torch.empty(2, 3, dtype=I32), tl, 16, 2, 1, 1)
        torch.library.opcheck(torch.ops.smla.dcp_local_topk.default, args)
