//! Link options of the `revfs` binary.
//!
//! `-z pack-relative-relocs`: the binary's ~20,000 relative relocations as DT_RELR (a few
//! kilobytes instead of 470 KB of `.rela.dyn`), which the dynamic loader applies faster at
//! every start of a command (docs/BENCHMARKS.md, "Start-up"). Needs binutils 2.38 and
//! glibc 2.36 (Debian 12 has 2.40 and 2.36); the binary then asks for
//! `GLIBC_ABI_DT_RELR`, which older C libraries refuse with a clear loader error.

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
