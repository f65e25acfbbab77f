//! The daemon of one mount and the ways to reach it.
//!
//! Owns the daemon's start-up and request dispatch ([`daemon`]), the control socket's
//! protocol, server and client ([`control`]), the mount's state directory ([`state`]), the hg
//! share in it ([`share`]), its redirections ([`redirect`]) and working copies kept while no daemon serves them ([`kept`]). It
//! sits on top: it may use every other subsystem, and none of them imports it.

pub mod control;
pub mod daemon;
pub mod kept;
pub mod redirect;
pub mod share;
pub mod state;
