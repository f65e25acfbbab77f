//! Link options of the `revfs` binary, each for the start-up of a command
//! (docs/BENCHMARKS.md, "Start-up").
//!
//! `-z pack-relative-relocs`: the binary's ~20,000 relative relocations as DT_RELR (a few
//! kilobytes instead of 470 KB of `.rela.dyn`), which the dynamic loader applies faster at
//! every start of a command. Needs binutils 2.38 and glibc 2.36 (Debian 12 has 2.40 and
//! 2.36); the binary then asks for `GLIBC_ABI_DT_RELR`, which older C libraries refuse with
//! a clear loader error.
//!
//! The unwinder linked in (libgcc_eh) rather than loaded (libgcc_s.so.1): Rust's standard
//! library asks for `-lgcc_s`, which this directory's `libgcc_s.so`, a linker script, turns
//! into the static `libgcc_eh.a` (what `gcc -static-libgcc` does). The shared library's
//! constructor (`__cpu_indicator_init`) runs `cpuid` about ten times, and in a virtual
//! machine each `cpuid` traps to the hypervisor (12 us each on this project's machines):
//! with the mapping and relocation of the library itself, 0.15-0.2 ms of every command.
//! Panics unwind and print backtraces as before (the same unwinder, linked statically).

use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    let dir = out.join("static-unwinder");
    let script = dir.join("libgcc_s.so");
    if std::fs::create_dir_all(&dir).is_ok()
        && std::fs::write(
            &script,
            "/* revfs: the unwinder linked statically */\nINPUT(-lgcc_eh)\n",
        )
        .is_ok()
    {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
