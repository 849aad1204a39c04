//! What the parser is made of: its states, the ESI words it matches (the match tables) and
//! what it keeps of a tag being read, and the byte classes of XML it uses.

/// Where the parser is in the markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Start,
    TestXml,
    NotXml,
    NextTag,
    NotMyTag,
    StartTag,
    Comment,
    InTag,
    TagError,
    Attr,
    SkipAttr,
    AttrDelim,
    AttrVal,
    Until,
    Match,
}

/// What a match table entry leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hit {
    Comment,
    EsiTag,
    Cdata,
    Include,
    Remove,
    EsiComment,
    Attr(Wanted),
}

/// What a failed match leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Miss {
    NotMyTag,
    Bogon,
    SkipAttr,
}

/// An include attribute whose value is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wanted {
    Src,
    Alt,
    OnError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    StartTag,
    Esi,
    IncludeAttr,
}

impl Table {
    pub(super) fn entries(self) -> &'static [(&'static [u8], Hit)] {
        match self {
            Table::StartTag => &[
                (b"!--", Hit::Comment),
                (b"esi:", Hit::EsiTag),
                (b"![CDATA[", Hit::Cdata),
            ],
            Table::Esi => &[
                (b"include", Hit::Include),
                (b"remove", Hit::Remove),
                (b"comment", Hit::EsiComment),
            ],
            Table::IncludeAttr => &[
                (b"src=", Hit::Attr(Wanted::Src)),
                (b"alt=", Hit::Attr(Wanted::Alt)),
                (b"onerror=", Hit::Attr(Wanted::OnError)),
            ],
        }
    }

    pub(super) fn miss(self) -> Miss {
        match self {
            Table::StartTag => Miss::NotMyTag,
            Table::Esi => Miss::Bogon,
            Table::IncludeAttr => Miss::SkipAttr,
        }
    }
}

/// The ESI tag being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    Include,
    Remove,
    Comment,
}

/// The attributes of the `<esi:include>` being read.
#[derive(Debug, Default)]
pub(super) struct PendingInclude {
    pub(super) src: Option<Vec<u8>>,
    pub(super) alt: Option<Vec<u8>>,
    pub(super) onerror: Option<Vec<u8>>,
}

pub(super) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// XML's white space (Varnish's `vct_islws`).
pub(super) fn is_lws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Space or tab (Varnish's `vct_issp`).
pub(super) fn is_sp(b: u8) -> bool {
    matches!(b, b' ' | b'\t')
}

pub(super) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':' || b >= 0x80
}

pub(super) fn is_name(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit() || b == b'-' || b == b'.'
}
