//! The machine's idle CPUs, as they bear on a mount's round trips: on a KVM guest whose
//! idle driver is `haltpoll` with polling turned off (`guest_halt_poll_ns` = 0), an idle
//! CPU halts at once, and every wake-up of a halted CPU is an exit to the hypervisor. Each
//! request to a daemon wakes a thread, and each answer wakes the program that waits, most
//! often on the other CPU: measured on such a guest, a round trip cost 2 to 3 times what it
//! costs with 200 us of polling (docs/BENCHMARKS.md, "What a round trip costs"). Said as a
//! note: nothing is broken, and the setting is the machine's, not revfs's (a mount can ask
//! for polling while its requests come: `mount.cpu_latency_us`, vfs/src/cpu_latency.rs).

use super::Report;

/// The idle driver's name (`/sys/devices/system/cpu/cpuidle/current_driver`).
pub const DRIVER: &str = "/sys/devices/system/cpu/cpuidle/current_driver";
/// How long an idle CPU polls before it halts, in nanoseconds (haltpoll's parameter).
pub const POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// Notes a haltpoll guest whose idle CPUs do not poll; says nothing on other machines.
pub fn check_idle_cpus(r: &mut Report) {
    let driver = std::fs::read_to_string(DRIVER).unwrap_or_default();
    if driver.trim() != "haltpoll" {
        return;
    }
    let Some(ns) = std::fs::read_to_string(POLL_NS)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return;
    };
    r.check(&format!("idle CPUs (haltpoll, guest_halt_poll_ns = {ns})"));
    if ns == 0 {
        r.note(
            "idle CPUs halt at once: each request to a mount's daemon and each answer may \
             wait for a halted CPU to wake, which made a round trip 2 to 3 times slower on a \
             KVM guest; as root, `echo 200000 > /sys/module/haltpoll/parameters/\
             guest_halt_poll_ns` lets an idle CPU poll 200 us before it halts, or \
             `mount.cpu_latency_us = 0` in revfs's configuration makes idle CPUs poll while \
             a mount's requests come",
        );
    }
}
