"""bench/sass_roles.py on saved `cuobjdump -sass` text (no GPU, no cuobjdump needed)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "sass_roles.py"


def sass(producer_extra="", target="0x0040", budget="0x98"):
    return f"""
        code for sm_90a
                Function : _Z6kernelPf
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                   /* 0x00000a0000017a02 */
        /*0010*/                   USETMAXREG.DEALLOC.CTAPOOL {budget} ;        /* 0x00000000000079c8 */
        /*0020*/                   LDG.E.CONSTANT R2, desc[UR4][R2.64] ;    /* 0x0000000402027981 */
        /*0030*/                   IMAD R3, R2, 0x4, RZ ;                   /* 0x0000000402037824 */
        /*0040*/                   LDG.E.NA.128.CONSTANT R4, desc[UR4][R4.64] ; /* 0x0000000404047981 */
        /*0050*/                   F2FP.BF16.F32.PACK_AB R3, R4, R5 ;       /* 0x000000050403723e */
        /*0060*/                   {producer_extra}STAS.128 [R8.64], R4 ;   /* 0x0000000408007387 */
        /*0070*/               @P0 BRA {target} ;                           /* 0xfffffffc00f40947 */
        /*0080*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0 ; /* 0x00000000000079c8 */
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ; /* 0x0000000400007d80 */
        /*00a0*/                   EXIT ;                                   /* 0x000000000000794d */
"""


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)


def test_roles_split_at_setmaxnreg_and_find_the_loop(tmp_path):
    f = tmp_path / "a.sass"
    f.write_text(sass())
    p = run("roles", str(f), "--kernel", "kernel")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "_Z6kernelPf: 11 instructions" in out
    assert "entry: 1 instructions" in out
    assert "152 registers: 7 instructions" in out
    assert "192 registers: 3 instructions" in out
    # The backward branch to 0x0040 makes a 4-instruction loop: its load at 0, its cluster store at 2.
    assert "loop: 4 instructions" in out
    assert "    0  LDG.E.NA.128.CONSTANT R4, desc[UR4][R4.64]" in out
    assert "    2  STAS.128 [R8.64], R4" in out


def test_same_ignores_addresses_and_finds_changes(tmp_path):
    a, b, c = tmp_path / "a.sass", tmp_path / "b.sass", tmp_path / "c.sass"
    a.write_text(sass())
    b.write_text(sass(target="0x0030"))  # a branch target moved: layout, not instructions
    c.write_text(sass(producer_extra="@P1 "))  # a predicate added: a different instruction
    assert run("same", str(a), str(b)).stdout.startswith("same  _Z6kernelPf")
    assert run("same", str(a), str(c)).stdout.startswith("differs (11 / 11 instructions)  _Z6kernelPf")
    d = tmp_path / "d.sass"
    d.write_text(sass(budget="0xa0"))  # another register budget: an immediate, not an address
    assert run("same", str(a), str(d)).stdout.startswith("differs (11 / 11 instructions)  _Z6kernelPf")


def test_unknown_kernel_is_an_error(tmp_path):
    f = tmp_path / "a.sass"
    f.write_text(sass())
    p = run("roles", str(f), "--kernel", "nothing_like_it")
    assert p.returncode != 0 and "no kernel whose name contains 'nothing_like_it'" in p.stderr
