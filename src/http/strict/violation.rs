//! Why a request was refused ([`Violation`]: its status, log word and counter) and how
//! refusals are grouped in counters ([`Class`]).

/// How rejections are grouped in counters (`client_reject_<class>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    RequestLine,
    Header,
    Host,
    Framing,
    HopByHop,
    Chunked,
    Limit,
}

macro_rules! violations {
    ($( $name:ident = $code:literal, $status:literal, $class:ident, $word:literal; )*) => {
        /// Why a request was refused. `as_str` is the `Cache-Status` detail and log word.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Violation { $( $name = $code, )* }

        impl Violation {
            /// Every violation, in code order.
            pub const ALL: &'static [Violation] = &[ $( Violation::$name, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( Violation::$name => $word, )* }
            }

            /// The access-log / `shellac log` reason: `refused:` and the word.
            pub fn refused_reason(self) -> &'static str {
                match self { $( Violation::$name => concat!("refused:", $word), )* }
            }

            /// The status Shellac answers with.
            pub fn status(self) -> u16 {
                match self { $( Violation::$name => $status, )* }
            }

            pub fn class(self) -> Class {
                match self { $( Violation::$name => Class::$class, )* }
            }

            /// The inverse of `self as u8` (for passing a violation through an atomic).
            pub fn from_code(code: u8) -> Option<Violation> {
                match code { $( $code => Some(Violation::$name), )* _ => None }
            }
        }
    };
}

violations! {
    BadMethod = 1, 400, RequestLine, "bad-method";
    BadTarget = 2, 400, RequestLine, "bad-target";
    BadVersion = 3, 400, RequestLine, "bad-version";
    VersionNotSupported = 4, 505, RequestLine, "version-not-supported";
    BadRequestLine = 5, 400, RequestLine, "bad-request-line";
    BareLf = 6, 400, Header, "bare-lf";
    ObsFold = 7, 400, Header, "obs-fold";
    SpaceBeforeColon = 8, 400, Header, "space-before-colon";
    BadFieldName = 9, 400, Header, "bad-field-name";
    BadFieldValue = 10, 400, Header, "bad-field-value";
    MissingHost = 11, 400, Host, "missing-host";
    DuplicateHost = 12, 400, Host, "duplicate-host";
    BadHost = 13, 400, Host, "bad-host";
    LengthAndChunked = 14, 400, Framing, "content-length-and-transfer-encoding";
    BadContentLength = 15, 400, Framing, "bad-content-length";
    ConflictingContentLength = 16, 400, Framing, "conflicting-content-length";
    BadTransferEncoding = 17, 400, Framing, "bad-transfer-encoding";
    UnknownTransferCoding = 18, 501, Framing, "unknown-transfer-coding";
    TransferEncodingHttp10 = 19, 400, Framing, "transfer-encoding-in-http10";
    ConnectionNamesEndToEnd = 20, 400, HopByHop, "connection-names-end-to-end-field";
    BadConnection = 21, 400, HopByHop, "bad-connection";
    BadChunkSize = 22, 400, Chunked, "bad-chunk-size";
    BadChunkExtension = 23, 400, Chunked, "bad-chunk-extension";
    BadChunkData = 24, 400, Chunked, "bad-chunk-data";
    BadTrailer = 25, 400, Chunked, "bad-trailer";
    UriTooLong = 26, 414, Limit, "uri-too-long";
    HeaderTooLarge = 27, 431, Limit, "header-too-large";
    TooManyHeaders = 28, 431, Limit, "too-many-headers";
    BodyTooLarge = 29, 413, Limit, "body-too-large";
    // Not a parsing rule but policy, applied by the gate to a valid head: Shellac is no
    // forward proxy.
    ConnectNotSupported = 30, 405, RequestLine, "connect-not-supported";
}
