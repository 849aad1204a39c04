//! Binding a call's arguments to a function's signature (`sigs.rs`): where it may be called,
//! each argument to its parameter (positional, then named, then defaults), each compiled as
//! its parameter's kind asks (a constant regular expression, a header, an enum word, `req`
//! or `bereq`, else an expression of the parameter's type), then the run-time function.

use crate::vcl::pcre::Pattern;

use super::super::ast::{Arg, Expr as AstExpr, Pos};
use super::super::ir::{Expr, Func, Text, ThrottleOp};
use super::super::types::Type;
use super::Checker;
use super::names::Access;
use super::patterns::{compile_regex, replacement};
use super::sigs::{Dflt, F, P as Param, Sig};

/// A call's arguments compiled: one expression per parameter (a stand-in for a regular
/// expression's), and the regular expressions in order.
struct Bound {
    args: Vec<Expr>,
    regexes: Vec<Pattern>,
}

impl Checker<'_> {
    /// Binds `args` to `sig`'s parameters and compiles the call.
    pub(super) fn bind(&mut self, sig: &Sig, args: &[Arg], pos: Pos) -> (Expr, Type) {
        let bad = (Expr::Bool(false), Type::Error);
        if sig.within != 0 && self.here != 0 && self.here & !sig.within != 0 {
            let outside: Vec<&str> = Self::method_names(self.here & !sig.within);
            self.error(
                pos,
                format!(
                    "{}() is Not available in subroutine '{}'.",
                    sig.name,
                    outside.first().copied().unwrap_or("?")
                ),
            );
            return bad;
        }
        let (given, placed) = self.place(sig, args);
        let compiled = self.compile_args(sig, &given, pos);
        let (Some(mut bound), true) = (compiled, placed) else {
            return bad;
        };
        match self.func(sig, &mut bound, pos) {
            Some(func) => (Expr::Call(func, bound.args.into_boxed_slice()), sig.ret),
            None => bad,
        }
    }

    /// Each argument at its parameter's place (`None`: not given), and false when an argument
    /// has no place or two have one (reported; the values are still compiled, so every
    /// problem of the call is reported at once).
    fn place<'a>(&mut self, sig: &Sig, args: &'a [Arg]) -> (Vec<Option<&'a AstExpr>>, bool) {
        let mut given: Vec<Option<&AstExpr>> = vec![None; sig.params.len()];
        let mut ok = true;
        for (i, a) in args.iter().enumerate() {
            let slot = match &a.name {
                Some(n) => sig.params.iter().position(|p| p.name == n),
                None => (i < sig.params.len()).then_some(i),
            };
            match slot {
                Some(s) if given[s].is_none() => given[s] = Some(&a.value),
                Some(_) => {
                    self.error(
                        a.value.pos(),
                        format!("{}(): argument given twice", sig.name),
                    );
                    ok = false;
                }
                None => {
                    let message = match &a.name {
                        Some(n) => format!("{}(): Unknown argument '{n}'", sig.name),
                        None => format!(
                            "{}() takes {} argument{}, not {}",
                            sig.name,
                            sig.params.len(),
                            if sig.params.len() == 1 { "" } else { "s" },
                            args.len()
                        ),
                    };
                    self.error(a.value.pos(), message);
                    ok = false;
                }
            }
        }
        (given, ok)
    }

    /// Every parameter's value compiled: the argument given, else the default; `None` when
    /// one is wrong (each reported, so a call with two wrong arguments says both).
    fn compile_args(&mut self, sig: &Sig, given: &[Option<&AstExpr>], pos: Pos) -> Option<Bound> {
        let mut ok = true;
        let mut bound = Bound {
            args: Vec::with_capacity(sig.params.len()),
            regexes: Vec::new(),
        };
        for (param, value) in sig.params.iter().zip(given) {
            match value {
                None => ok &= Self::default_arg(self, sig, param, pos, &mut bound),
                Some(v) => ok &= self.given_arg(sig, param, v, &mut bound),
            }
        }
        ok.then_some(bound)
    }

    /// A parameter not given: its default, or an error when it is required.
    fn default_arg(&mut self, sig: &Sig, param: &Param, pos: Pos, bound: &mut Bound) -> bool {
        let value = match param.default {
            Dflt::Required => {
                self.error(
                    pos,
                    format!("{}(): Argument '{}' missing", sig.name, param.name),
                );
                return false;
            }
            Dflt::Str(s) => Expr::Str(Text::new(s)),
            Dflt::Int(n) => Expr::Int(n),
            Dflt::Real(r) => Expr::Real(r),
            Dflt::Bool(b) => Expr::Bool(b),
            Dflt::Dur(d) => Expr::Duration(d),
            Dflt::Bytes(n) => Expr::Bytes(n),
            Dflt::NoIp => Expr::NoIp,
            Dflt::Unsupported => Expr::Bool(false),
        };
        bound.args.push(value);
        true
    }

    /// A parameter given `v`, compiled as its kind asks; false when it is wrong (reported).
    fn given_arg(&mut self, sig: &Sig, param: &Param, v: &AstExpr, bound: &mut Bound) -> bool {
        if let Dflt::Unsupported = param.default {
            self.unsupported(
                v.pos(),
                format!(
                    "{}(): the argument '{}' is not supported by Shellac",
                    sig.name, param.name
                ),
            );
            return false;
        }
        let value = if param.regex {
            match self.regex_arg(sig, v) {
                Some(r) => {
                    bound.regexes.push(r);
                    Some(Expr::Bool(false))
                }
                None => None,
            }
        } else if param.ty == Type::Header {
            self.header_arg(sig, v)
        } else if param.ty == Type::Enum {
            self.enum_arg(sig, param, v)
        } else if param.ty == Type::Http {
            self.http_arg(sig, v)
        } else {
            Some(self.expr_as(v, param.ty))
        };
        match value {
            Some(e) => {
                bound.args.push(e);
                true
            }
            None => false,
        }
    }

    /// A regular expression: a constant string, compiled now.
    fn regex_arg(&mut self, sig: &Sig, v: &AstExpr) -> Option<Pattern> {
        if let AstExpr::Str(s, p) = v {
            return compile_regex(self, s, *p);
        }
        if let Some(text) = super::consts::const_str(v) {
            return compile_regex(self, &text, v.pos());
        }
        let (_, t) = self.expr(v, None);
        if t != Type::Error {
            self.error(
                v.pos(),
                format!(
                    "{}(): Expected CSTR: the regular expression must be a constant string",
                    sig.name
                ),
            );
        }
        None
    }

    /// A header such as `req.http.X`, as the variable itself.
    fn header_arg(&mut self, sig: &Sig, v: &AstExpr) -> Option<Expr> {
        let AstExpr::Name(n, p) = v else {
            self.error(
                v.pos(),
                format!("{}(): expected a header such as req.http.X", sig.name),
            );
            return None;
        };
        match self.variable(n, *p, Access::Read) {
            Some((var, Type::Header)) => Some(Expr::Var(var)),
            Some(_) => {
                self.error(*p, format!("{}(): '{n}' is not a header", sig.name));
                None
            }
            None => None,
        }
    }

    /// One of the parameter's enum words.
    fn enum_arg(&mut self, sig: &Sig, param: &Param, v: &AstExpr) -> Option<Expr> {
        match v {
            AstExpr::Name(n, _) if param.values.contains(&n.as_str()) => {
                Some(Expr::Str(Text::new(n)))
            }
            other => {
                self.error(
                    other.pos(),
                    format!(
                        "{}(): Wrong enum value for '{}'. Expected one of: {}",
                        sig.name,
                        param.name,
                        param.values.join(", ")
                    ),
                );
                None
            }
        }
    }

    /// `req` or `bereq` (true for `req`).
    fn http_arg(&mut self, sig: &Sig, v: &AstExpr) -> Option<Expr> {
        match v {
            AstExpr::Name(n, _) if n == "req" || n == "bereq" => Some(Expr::Bool(n == "req")),
            other => {
                self.error(
                    other.pos(),
                    format!("{}(): expected req or bereq", sig.name),
                );
                None
            }
        }
    }

    /// The run-time function of `sig` over the compiled arguments (some functions take
    /// constants out of them now); `None` when one of those is not a constant (reported).
    fn func(&mut self, sig: &Sig, bound: &mut Bound, pos: Pos) -> Option<Func> {
        if let Some(f) = plain(sig.f) {
            return Some(f);
        }
        let compiled = &mut bound.args;
        let regexes = &mut bound.regexes;
        Some(match sig.f {
            F::Regsub | F::Regsuball => {
                let regex = regexes.remove(0);
                // The replacement in the regex crate's syntax: converted now if constant.
                let sub = compiled.remove(2);
                let sub = match sub {
                    Expr::Str(t) => Expr::Str(Text::new(&replacement(&t.text))),
                    dynamic => Expr::Call(Func::Replacement, Box::new([dynamic])),
                };
                compiled.truncate(1);
                compiled.push(sub);
                if sig.f == F::Regsub {
                    Func::Regsub(regex)
                } else {
                    Func::Regsuball(regex)
                }
            }
            F::Rollback => {
                if compiled
                    .first()
                    .is_some_and(|e| matches!(e, Expr::Bool(false)))
                {
                    self.unsupported(pos, "std.rollback(bereq) is not supported by Shellac");
                    return None;
                }
                compiled.clear();
                Func::Rollback
            }
            F::FileRead => self.file_read(compiled, pos)?,
            F::Collect => self.collect(compiled, pos)?,
            F::CacheReqBody => self.cache_req_body(compiled, pos)?,
            F::CFilterRe => {
                compiled.clear();
                Func::CookieFilterRe(regexes.remove(0))
            }
            F::CKeepRe => {
                compiled.clear();
                Func::CookieKeepRe(regexes.remove(0))
            }
            _ => return None, // `plain` answered for every other function
        })
    }

    /// `std.fileread(PATH)`: the file is read now, so the path must be a constant.
    fn file_read(&mut self, compiled: &mut Vec<Expr>, pos: Pos) -> Option<Func> {
        match compiled.first() {
            Some(Expr::Str(path)) => match std::fs::read_to_string(&*path.text) {
                Ok(text) => {
                    compiled.clear();
                    Some(Func::FileRead(Text::new(&text)))
                }
                Err(e) => {
                    self.error(pos, format!("std.fileread(\"{}\"): {e}", path.text));
                    None
                }
            },
            _ => {
                self.unsupported(
                    pos,
                    "std.fileread() of a path computed at run time: Shellac reads the file \
                     when it loads the VCL, so the path must be a constant string",
                );
                None
            }
        }
    }

    /// `std.collect(HEADER, SEP)`: the separator must be a constant.
    fn collect(&mut self, compiled: &mut Vec<Expr>, pos: Pos) -> Option<Func> {
        let Some(Expr::Var(var)) = compiled.first().cloned() else {
            return None;
        };
        let sep = match compiled.get(1) {
            Some(Expr::Str(t)) => t.clone(),
            _ => {
                self.unsupported(pos, "std.collect(): the separator must be a constant");
                return None;
            }
        };
        compiled.clear();
        Some(Func::StdCollect(var, sep))
    }

    /// `std.cache_req_body(SIZE)`: the body is read before vcl_recv, up to the largest
    /// constant size the VCL names.
    fn cache_req_body(&mut self, compiled: &mut Vec<Expr>, pos: Pos) -> Option<Func> {
        match compiled.first() {
            Some(Expr::Bytes(size)) => {
                let size = *size;
                self.req_body_keep = Some(self.req_body_keep.map_or(size, |k| k.max(size)));
                compiled.clear();
                Some(Func::StdCacheReqBody(size))
            }
            _ => {
                self.unsupported(
                    pos,
                    "std.cache_req_body() with a size computed at run time: Shellac reads \
                     the body before vcl_recv, up to the largest size the VCL names, so \
                     the size must be a constant (`std.cache_req_body(64KB)`)",
                );
                None
            }
        }
    }
}

/// The run-time function of a VCL function that takes nothing out of its arguments at
/// compile time; `None` for those that do (`Checker::func` handles them).
fn plain(f: F) -> Option<Func> {
    Some(match f {
        F::HashData => Func::HashData,
        F::Ban => Func::Ban,
        F::StdBan => Func::StdBan,
        F::StdBanError => Func::StdBanError,
        F::BanUrl => Func::BanUrl,
        F::Synthetic => Func::Synthetic,
        F::Log => Func::StdLog,
        F::Syslog => Func::StdSyslog,
        F::ToLower => Func::StdToLower,
        F::ToUpper => Func::StdToUpper,
        F::Ip => Func::StdIp,
        F::Healthy => Func::StdHealthy,
        F::QuerySort => Func::StdQuerySort,
        F::Duration => Func::StdDuration,
        F::Integer => Func::StdInteger,
        F::Real => Func::StdReal,
        F::Time => Func::StdTime,
        F::Getenv => Func::StdGetenv,
        F::Round => Func::StdRound,
        F::Real2Integer => Func::StdReal2Integer,
        F::Real2Time => Func::StdReal2Time,
        F::Time2Integer => Func::StdTime2Integer,
        F::Time2Real => Func::StdTime2Real,
        F::Port => Func::StdPort,
        F::Strstr => Func::StdStrstr,
        F::Random => Func::StdRandom,
        F::Timestamp => Func::StdTimestamp,
        F::Now => Func::StdNow,
        F::PurgeHard => Func::PurgeHard,
        F::PurgeSoft => Func::PurgeSoft,
        F::XkeyPurge => Func::XkeyPurge,
        F::ThrottleIsDenied => Func::Throttle(ThrottleOp::IsDenied),
        F::ThrottleRemaining => Func::Throttle(ThrottleOp::Remaining),
        F::ThrottleBlocked => Func::Throttle(ThrottleOp::Blocked),
        F::ThrottleReturnToken => Func::Throttle(ThrottleOp::ReturnToken),
        F::XkeySoftPurge => Func::XkeySoftPurge,
        F::BlobDecode => Func::BlobDecode,
        F::BlobEncode => Func::BlobEncode,
        F::BlobTranscode => Func::BlobTranscode,
        F::BlobEqual => Func::BlobEqual,
        F::BlobLength => Func::BlobLength,
        F::BlobSub => Func::BlobSub,
        F::CParse => Func::CookieParse,
        F::CGet => Func::CookieGet,
        F::CIsSet => Func::CookieIsSet,
        F::CSet => Func::CookieSet,
        F::CDelete => Func::CookieDelete,
        F::CFilter => Func::CookieFilter,
        F::CKeep => Func::CookieKeep,
        F::CGetString => Func::CookieGetString,
        F::CClean => Func::CookieClean,
        F::Regsub
        | F::Regsuball
        | F::Rollback
        | F::FileRead
        | F::Collect
        | F::CacheReqBody
        | F::CFilterRe
        | F::CKeepRe => return None,
    })
}
