//! Running a compiled program (`ir::Program`) at a step of a request: the statements of one
//! built-in subroutine (the operator's, then the built-in VCL) against an [`Env`] — what the
//! request path gives the program to read and change at that step — until one returns an
//! action. Reading a variable or testing a regex allocates nothing; setting a header to a
//! constant clones a ready value; setting it to the value it already has does nothing.

mod cookie;
mod eval;
mod exec;
mod funcs;
mod state;
#[cfg(test)]
mod tests;
pub mod value;

use super::ir::Program;
use super::types::Method;
pub use cookie::CookieJar;
pub use state::{Env, SessTimeout, SoftPurge, State, Verdict};
pub use value::{BackendSel, Value};

/// Runs built-in subroutine `m` (the operator's code, then the built-in VCL) and returns what
/// it decided. A failure while running is `Verdict::Fail` with its reason.
pub fn run(program: &Program, m: Method, env: &mut dyn Env) -> Verdict {
    let verdict = evaluate(program, m, env);
    env.state_mut().note(m, &verdict);
    verdict
}

/// [`run`] without noting the verdict in the trace (a dry run).
pub fn evaluate(program: &Program, m: Method, env: &mut dyn Env) -> Verdict {
    match exec::block(program, program.method(m), env) {
        Ok(exec::Flow::Return(v)) => v,
        // A built-in subroutine always returns (the built-in VCL does); vcl_init / vcl_fini
        // end without.
        Ok(exec::Flow::Next | exec::Flow::Leave) => Verdict::Ok,
        Err(reason) => Verdict::Fail(reason),
    }
}
