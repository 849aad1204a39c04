//! What one setting is: its kind of value (the words errors use, the range the validator
//! checks), its default, and the definition each section's table lists.

use std::time::Duration;

use serde_json::Value;

use crate::config::units;

/// What a setting holds: the words errors use, the range the validator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true` or `false`.
    Bool,
    /// A whole number in `min..=max`.
    Count { min: u64, max: u64 },
    /// A TCP port, 1-65535.
    Port,
    /// An HTTP status in `min..=max`; `what` names it in messages.
    Status {
        min: u16,
        max: u16,
        what: &'static str,
    },
    /// A list of HTTP statuses (100-599).
    Statuses,
    /// A duration of at least `min` (and at most 10 years, as every duration).
    Duration { min: Duration },
    /// A size in `min..=max` bytes.
    Size { min: u64, max: u64 },
    /// A list of `ADDRESS:PORT` (one is accepted for a list of one).
    Addresses,
    /// `ADDRESS:PORT`, or `"off"` / `false`.
    AdminAddress,
    /// `true`, `false`, or a list of `server.listen` addresses (`[http2] h2c`).
    Listeners,
    /// `true`, `false`, or a list of client listener addresses, cleartext or TLS
    /// (`server.proxy_protocol`).
    ClientListeners,
    /// A list of IP networks (one is accepted).
    Networks,
    /// A string, described by the phrase given.
    Text(&'static str),
    /// A list of strings, described by the phrase given (one is accepted).
    Texts(&'static str),
    /// One of the words given.
    Choice(&'static [&'static str]),
    /// A table of header field name → text, described by the phrase given.
    FieldTable(&'static str),
    /// A table of its own keys (`[storage.disk]`, a rule's `synth`): section `section`.
    Table { section: &'static str },
    /// A `[[probe]]`'s name, or an inline probe table.
    Probe,
    /// A list of tables with the keys of `[[rule]]` (`[[site.rule]]`).
    Rules,
}

pub(super) const ONE_NANOSECOND: Duration = Duration::from_nanos(1);

impl Kind {
    /// What a value of this kind is, in an operator's words: "a port number (1-65535)".
    pub fn phrase(&self) -> String {
        match *self {
            Kind::Bool => "true or false".into(),
            Kind::Count { min, max } => match (min, max) {
                (0, u64::MAX) => "a whole number (0 or more)".into(),
                (min, u64::MAX) => format!("a whole number ({min} or more)"),
                (min, max) => format!("a whole number ({min}-{max})"),
            },
            Kind::Port => "a port number (1-65535)".into(),
            Kind::Status { min, max, what } => format!("{what} ({min}-{max})"),
            Kind::Statuses => "an HTTP status (100-599), or a list of them such as [502, 503]".into(),
            Kind::Duration { .. } => "a duration such as \"30s\", \"500ms\" or \"2h\"".into(),
            Kind::Size { .. } => "a size such as \"64KiB\" or \"512MiB\"".into(),
            Kind::Addresses => {
                "an address such as \"127.0.0.1:6081\", or a list of them such as [\"127.0.0.1:6081\", \"[::1]:6081\"]".into()
            }
            Kind::AdminAddress => "an address such as \"127.0.0.1:6082\", or \"off\"".into(),
            Kind::Listeners => {
                "true, false, or a list of server.listen addresses such as [\"127.0.0.1:6081\"]"
                    .into()
            }
            Kind::ClientListeners => {
                "true, false, or a list of client listener addresses (server.listen or a [[tls]]'s listen) such as [\"0.0.0.0:443\"]"
                    .into()
            }
            Kind::Networks => {
                "a network such as \"10.0.0.0/8\" or \"::1\", or a list of them".into()
            }
            Kind::Text(what) | Kind::Texts(what) | Kind::FieldTable(what) => what.into(),
            Kind::Choice(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
                format!("one of {}", quoted.join(", "))
            }
            Kind::Table { .. } => "a table".into(),
            Kind::Probe => "the name of a [[probe]], or an inline probe table".into(),
            Kind::Rules => "a list of [[rule]] tables".into(),
        }
    }

    /// The allowed range, as the reference shows it ("1 – 10000", "≥ 100ms"); None when any
    /// value of the kind is allowed.
    pub fn range(&self) -> Option<String> {
        match *self {
            // A 32-bit bound is a limit of the type, not a range worth reading.
            Kind::Count { min: 0, max } if max >= u64::from(u32::MAX) => None,
            Kind::Count { min, max: u64::MAX } => Some(format!("≥ {min}")),
            Kind::Count { min, max } => Some(format!("{min} – {max}")),
            Kind::Port => Some("1 – 65535".into()),
            Kind::Status { min, max, .. } => Some(format!("{min} – {max}")),
            Kind::Statuses => Some("100 – 599 each".into()),
            Kind::Duration { min } if min.is_zero() => None,
            Kind::Duration { min } if min == ONE_NANOSECOND => Some("> 0".into()),
            Kind::Duration { min } => Some(format!("≥ {}", units::format_duration(min))),
            Kind::Size {
                min: 0,
                max: units::MAX_SIZE,
            } => None,
            Kind::Size {
                min: 1,
                max: units::MAX_SIZE,
            } => Some("> 0".into()),
            Kind::Size {
                min,
                max: units::MAX_SIZE,
            } => Some(format!("≥ {}", units::format_size(min))),
            Kind::Size { min, max } => Some(format!(
                "{} – {}",
                units::format_size(min),
                units::format_size(max)
            )),
            _ => None,
        }
    }

    /// The problem with `value` (as serialized) for this kind's range, if any.
    pub(super) fn check(&self, value: &Value) -> Option<String> {
        match *self {
            Kind::Count { min, max } => {
                let v = value.as_u64()?;
                (!(min..=max).contains(&v)).then(|| match max {
                    u64::MAX => format!("must be at least {min}"),
                    _ => format!("must be between {min} and {max}"),
                })
            }
            Kind::Port => {
                let v = value.as_u64()?;
                (!(1..=65_535).contains(&v)).then(|| "must be between 1 and 65535".into())
            }
            Kind::Status { min, max, what } => {
                let v = value.as_u64()?;
                (!(u64::from(min)..=u64::from(max)).contains(&v))
                    .then(|| format!("{v} is not {what} ({min}-{max})"))
            }
            Kind::Duration { min } => {
                let d = units::parse_duration(value.as_str()?).ok()?;
                (d < min).then(|| {
                    if min == ONE_NANOSECOND {
                        "must be greater than 0".into()
                    } else {
                        format!("must be at least {}", units::format_duration(min))
                    }
                })
            }
            Kind::Size { min, max } => {
                let b = units::parse_size(value.as_str()?).ok()?;
                (!(min..=max).contains(&b)).then(|| match (min, max) {
                    (1, units::MAX_SIZE) => "must be greater than 0".into(),
                    (min, units::MAX_SIZE) => {
                        format!("must be at least {}", units::format_size(min))
                    }
                    (min, max) => format!(
                        "must be between {} and {}",
                        units::format_size(min),
                        units::format_size(max)
                    ),
                })
            }
            _ => None,
        }
    }
}

/// What a setting is when the file does not give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    /// This value, as TOML text (`"60s"`, `4096`, `["websocket"]`).
    Value(&'static str),
    /// None: the key must be given.
    Required,
    /// No value; the text says what that means ("none", "first director, else first backend").
    Unset(&'static str),
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The table it is in: `server`, `storage.disk`, `backend`, `rule.synth`, ...
    pub section: &'static str,
    pub key: &'static str,
    pub kind: Kind,
    pub default: Default,
    /// A value to show (and to use for a required key whose value was wrong, so checking can
    /// go on): TOML text, `""` when the default serves.
    pub example: &'static str,
    /// A reload cannot change it (a restart is needed).
    pub restart: bool,
    /// Documentation (Markdown): what it does, for whom, counters, caveats.
    pub doc: &'static str,
}

/// The timeouts of one backend fetch, which both `[[backend]]` and `[vcl]` (for the VCL
/// file's backends) set, with the defaults of Varnish's parameters of the same names: one
/// definition of each, every section with its own `doc`.
#[derive(Clone, Copy, Debug)]
pub(super) enum FetchTimeout {
    /// `connect_timeout`, 3500 ms.
    Connect,
    /// `first_byte_timeout`, 60 s.
    FirstByte,
    /// `between_bytes_timeout`, 60 s.
    BetweenBytes,
}

impl FetchTimeout {
    /// The setting of this timeout in `section`, documented by `doc`.
    pub(super) const fn setting(self, section: &'static str, doc: &'static str) -> Setting {
        let (key, default) = match self {
            FetchTimeout::Connect => ("connect_timeout", r##""3500ms""##),
            FetchTimeout::FirstByte => ("first_byte_timeout", r##""60s""##),
            FetchTimeout::BetweenBytes => ("between_bytes_timeout", r##""60s""##),
        };
        Setting {
            section,
            key,
            kind: Kind::Duration {
                min: ONE_NANOSECOND,
            },
            default: Default::Value(default),
            example: r##""##,
            restart: false,
            doc,
        }
    }
}

impl Setting {
    /// TOML text of a valid value: the default, else the example.
    pub fn sample(&self) -> &'static str {
        match self.default {
            Default::Value(v) => v,
            _ => self.example,
        }
    }
}
