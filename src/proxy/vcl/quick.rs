//! Fast hits under a VCL program: a hit may skip the full path only when the program provably
//! changes nothing about it. That holds when the operator wrote no `vcl_hash`, `vcl_hit` or
//! `vcl_deliver` (the built-in ones key by URL and host and deliver as they are) and
//! `vcl_recv`, run on the raw request head without being able to change it, returns `hash`
//! (or `lookup`): any `set`, `unset` or call for its effect stops the dry run, and the request
//! takes the full path, where it runs for real.

use std::cell::Cell;
use std::net::SocketAddr;

use http::HeaderValue;

use super::VclRuntime;
use crate::vcl::ir::Var;
use crate::vcl::run::value::epoch;
use crate::vcl::run::{BackendSel, Env, State, Value, Verdict, evaluate};
use crate::vcl::types::Method;
use crate::vcl::vars::Slot;

/// Whether the program leaves hits alone but for what `vcl_recv` decides.
pub(super) fn hits_untouched(rt: &VclRuntime) -> bool {
    let p = &rt.program;
    !p.defines(Method::Hash) && !p.defines(Method::Hit) && !p.defines(Method::Deliver)
}

/// A request head as `vcl_recv` reads it in a dry run.
struct RawRequest<'a> {
    rt: &'a VclRuntime,
    method: &'a str,
    target: &'a str,
    fields: &'a [httparse::Header<'a>],
    client: SocketAddr,
    state: State,
    /// The run read something the full path would see differently (`Accept-Encoding` before
    /// its normalisation) or that a dry run does not have: its verdict does not count.
    doubt: Cell<bool>,
    normalised_ae: bool,
    now: f64,
}

impl Env for RawRequest<'_> {
    fn get(&self, var: &Var) -> Value<'_> {
        match var.slot {
            Slot::ReqMethod => Value::str(self.method),
            Slot::ReqUrl => Value::str(self.target),
            Slot::ReqProto => Value::str("HTTP/1.1"),
            Slot::ReqHttp => {
                let Some(name) = var.header.as_ref() else {
                    return Value::None;
                };
                if self.normalised_ae && name == http::header::ACCEPT_ENCODING {
                    self.doubt.set(true);
                }
                match self
                    .fields
                    .iter()
                    .find(|f| f.name.eq_ignore_ascii_case(name.as_str()))
                {
                    Some(f) => match std::str::from_utf8(f.value) {
                        Ok(s) => Value::str(s),
                        Err(_) => {
                            self.doubt.set(true);
                            Value::None
                        }
                    },
                    None => Value::None,
                }
            }
            Slot::ClientIp | Slot::RemoteIp => Value::Ip(self.client),
            Slot::Now => Value::Time(self.now),
            Slot::ReqRestarts | Slot::ReqEsiLevel => Value::Int(0),
            Slot::ServerHostname | Slot::ServerIdentity => Value::str(&self.rt.hostname),
            Slot::ReqBackend => Value::Backend(match self.rt.program.default_target {
                Some(t) => BackendSel {
                    target: t,
                    hash: None,
                },
                None => BackendSel::none(),
            }),
            Slot::Fixed(b, _) => Value::Bool(b),
            _ => {
                self.doubt.set(true);
                Value::None
            }
        }
    }

    fn set(&mut self, _: &Var, _: Value<'static>) -> Result<(), String> {
        Err("read-only".to_string())
    }

    fn set_header(&mut self, _: &Var, _: HeaderValue) -> Result<(), String> {
        Err("read-only".to_string())
    }

    fn unset(&mut self, _: &Var) -> Result<(), String> {
        Err("read-only".to_string())
    }

    fn collect(&mut self, _: &Var, _: &str) {
        self.doubt.set(true);
    }

    fn target_name(&self, target: u16) -> &str {
        self.rt
            .program
            .targets
            .get(target as usize)
            .map_or("", String::as_str)
    }

    fn healthy(&self, sel: BackendSel) -> bool {
        self.rt.member(sel).is_some_and(|m| m.healthy())
    }

    fn ban(&self, _: &str) -> Result<(), String> {
        self.doubt.set(true);
        Err("read-only".to_string())
    }

    fn log(&mut self, _: &str) {
        self.doubt.set(true);
    }

    fn rollback(&mut self) {
        self.doubt.set(true);
    }

    fn state(&self) -> &State {
        &self.state
    }

    fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// Whether `vcl_recv`, run on this request head, would look it up without changing it (so a
/// fresh object in memory answers it exactly as the full path would).
pub(in crate::proxy) fn recv_looks_up(
    rt: &VclRuntime,
    method: &str,
    target: &str,
    fields: &[httparse::Header<'_>],
    client: SocketAddr,
    normalised_ae: bool,
) -> bool {
    if !hits_untouched(rt) {
        return false;
    }
    let mut env = RawRequest {
        rt,
        method,
        target,
        fields,
        client,
        state: State::default(),
        doubt: Cell::new(false),
        normalised_ae,
        now: epoch(std::time::SystemTime::now()),
    };
    let verdict = evaluate(&rt.program, Method::Recv, &mut env);
    matches!(verdict, Verdict::Hash | Verdict::Lookup) && !env.doubt.get()
}
