//! What every HTTP-level command of a specification checks first: which side may run it, that
//! it has no stray arguments, that the session has a connection.

use crate::vtc::conn::Conn;
use crate::vtc::context::{Halt, Step, fail};
use crate::vtc::http::Session;

pub(super) fn only_client(s: &Session, args: &[String]) -> Step {
    if s.server {
        fail(format!("\"{}\" only possible in client", args[0]))
    } else {
        Ok(())
    }
}

pub(super) fn only_server(s: &Session, args: &[String]) -> Step {
    if s.server {
        Ok(())
    } else {
        fail(format!("\"{}\" only possible in server", args[0]))
    }
}

pub(super) fn conn(s: &mut Session) -> Step<&mut Conn> {
    s.conn
        .as_mut()
        .ok_or_else(|| Halt::Fail("no connection (closed)".into()))
}

pub(super) fn no_args(args: &[String]) -> Step {
    match args.get(1) {
        Some(a) => fail(format!("Unknown http {} spec: {a}", args[0])),
        None => Ok(()),
    }
}
