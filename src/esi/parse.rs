//! The ESI parser: Edge Side Includes found in a body while it is fetched, turned into a
//! [`Program`] (verbatim runs, skipped runs, includes) that is stored with the object, so a
//! hit never parses again.
//!
//! The dialect is Varnish's (its VEP parser: `<esi:include>`, `<esi:remove>`,
//! `<esi:comment>`, `<!--esi ... -->`, comments and CDATA passed through untouched, the same
//! XML leniency and the same error words, so `ESI_xmlerror` lines read alike), plus W3C ESI
//! 1.0's `alt=` and `onerror="continue"`, and `https://` includes kept instead of ignored.
//! The parser is a byte-level state machine fed with chunks of any size: the result does not
//! depend on where the chunks are cut. It keeps no more of the body than one attribute value
//! (at most [`MAX_ATTR`] bytes) and a 10-byte match buffer, and it never fails: malformed
//! markup is reported as a [`Diag`] and passed through or dropped as Varnish would.

use super::program::{Include, Op, Program, Target};

/// The longest `src=` / `alt=` / `onerror=` value kept; a longer one is an error and its tag
/// is dropped.
pub const MAX_ATTR: usize = 8 * 1024;
/// Diagnostics kept per page; every one is counted in [`Parser::errors`] / `warnings`.
pub const MAX_DIAGS: usize = 32;

/// How the parser reads a body.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Parse only a body whose first non-white byte is `<` (Varnish's default; its feature
    /// `esi_disable_xml_check` turns the check off).
    pub xml_check: bool,
    /// Skip a UTF-8 byte-order mark at the start (Varnish's feature `esi_remove_bom`).
    pub remove_bom: bool,
    /// After a `<` that starts no ESI tag, comment or CDATA, look for the next `<` at once
    /// instead of skipping to the tag's `>` (Varnish's feature `esi_ignore_other_elements`):
    /// an ESI tag inside another element's attribute, or after a stray `<`, is then found.
    pub ignore_other_elements: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            xml_check: true,
            remove_bom: false,
            ignore_other_elements: false,
        }
    }
}

/// How bad a [`Diag`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Malformed ESI: counted as an ESI error; the tag is dropped.
    Error,
    /// Accepted, but not as written (e.g. an include without its final `/`).
    Warning,
    /// Not an error: why the body was not parsed.
    Note,
}

/// One thing the parser reports about a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    /// Error, warning or note.
    pub severity: Severity,
    /// The body offset the parser had reached.
    pub offset: u64,
    /// Varnish's wording, e.g. `ESI 1.0 <esi:include> lacks src attr`.
    pub message: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
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
enum Hit {
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
enum Miss {
    NotMyTag,
    Bogon,
    SkipAttr,
}

/// An include attribute whose value is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Src,
    Alt,
    OnError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    StartTag,
    Esi,
    IncludeAttr,
}

impl Table {
    fn entries(self) -> &'static [(&'static [u8], Hit)] {
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

    fn miss(self) -> Miss {
        match self {
            Table::StartTag => Miss::NotMyTag,
            Table::Esi => Miss::Bogon,
            Table::IncludeAttr => Miss::SkipAttr,
        }
    }
}

/// The ESI tag being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Include,
    Remove,
    Comment,
}

/// The attributes of the `<esi:include>` being read.
#[derive(Debug, Default)]
struct PendingInclude {
    src: Option<Vec<u8>>,
    alt: Option<Vec<u8>>,
    onerror: Option<Vec<u8>>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A streaming ESI parser for one body.
#[derive(Debug)]
pub struct Parser {
    options: Options,
    /// The page's request target: relative `src`s are resolved against it.
    url: String,
    program: Program,
    state: State,
    /// Absolute offset of the next byte fed.
    pos: u64,
    /// Bytes before this offset are classified (verbatim or skip).
    marked: u64,
    esi_found: bool,
    remove: bool,
    endtag: bool,
    emptytag: bool,
    canattr: bool,
    in_esi_tag: bool,
    /// BOM bytes matched so far at the start.
    bom: usize,
    /// The `<!--esi` / `-->` matcher: the pattern and how much of it has matched.
    esicmt: Option<(&'static [u8], usize)>,
    until: (&'static [u8], usize),
    table: Table,
    /// The bytes of the table word matched so far (the longest word is 8 bytes).
    match_buf: [u8; 8],
    matched: usize,
    tag: Option<Tag>,
    include: PendingInclude,
    wanted: Option<Wanted>,
    value: Option<Vec<u8>>,
    value_too_long: bool,
    delim: u8,
    diags: Vec<Diag>,
    errors: u64,
    warnings: u64,
}

impl Parser {
    /// A parser for the body of the response to `url` (the backend request's target).
    pub fn new(url: &str, options: Options) -> Parser {
        Parser {
            options,
            url: url.to_owned(),
            program: Program::default(),
            state: State::Start,
            pos: 0,
            marked: 0,
            esi_found: false,
            remove: false,
            endtag: false,
            emptytag: false,
            canattr: false,
            in_esi_tag: false,
            bom: 0,
            esicmt: None,
            until: (b"", 0),
            table: Table::StartTag,
            match_buf: [0; 8],
            matched: 0,
            tag: None,
            include: PendingInclude::default(),
            wanted: None,
            value: None,
            value_too_long: false,
            delim: 0,
            diags: Vec::new(),
            errors: 0,
            warnings: 0,
        }
    }

    /// ESI errors seen so far (Varnish's `esi_errors`).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// ESI warnings seen so far (Varnish's `esi_warnings`).
    pub fn warnings(&self) -> u64 {
        self.warnings
    }

    /// The first [`MAX_DIAGS`] errors, warnings and notes, in body order.
    pub fn diags(&self) -> &[Diag] {
        &self.diags
    }

    /// Reads the next piece of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        while i < chunk.len() {
            i = self.step(chunk, i);
        }
        self.pos += chunk.len() as u64;
    }

    /// The end of the body: the program, or `None` when the body holds no ESI (it is then
    /// delivered as it is, as Varnish does).
    pub fn finish(mut self) -> (Option<Program>, Vec<Diag>) {
        if !matches!(
            self.state,
            State::Start | State::TestXml | State::NotXml | State::NextTag
        ) {
            self.diag(Severity::Error, "VEP ended inside a tag");
        }
        let verbatim = !(self.remove || self.in_esi_tag);
        let end = self.pos;
        self.mark(verbatim, end);
        let program = (self.esi_found && !self.program.ops.is_empty()).then_some(self.program);
        (program, self.diags)
    }

    /// Runs the current state on `chunk[i..]` (never empty); returns the next index.
    fn step(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
        match self.state {
            State::Start => {
                if self.options.remove_bom && chunk[i] == BOM[self.bom] {
                    self.bom += 1;
                    i += 1;
                    if self.bom == BOM.len() {
                        let at = self.at(i);
                        self.mark(false, at);
                        self.state = self.after_start();
                    }
                } else if self.bom > 0 {
                    // A partial mark: the body starts with 0xEF, which is not '<'.
                    if self.options.xml_check {
                        self.diag(
                            Severity::Note,
                            "No ESI processing, first char not '<' but BOM. (See feature esi_remove_bom)",
                        );
                        self.state = State::NotXml;
                    } else {
                        self.state = State::NextTag;
                    }
                } else {
                    self.state = self.after_start();
                }
            }
            State::TestXml => {
                while i < len && is_lws(chunk[i]) {
                    i += 1;
                }
                let at = self.at(i);
                self.mark(true, at);
                if i < len {
                    if chunk[i] == b'<' {
                        i += 1;
                        self.state = State::StartTag;
                    } else {
                        self.diag(
                            Severity::Note,
                            if chunk[i] == BOM[0] {
                                "No ESI processing, first char not '<' but BOM. (See feature esi_remove_bom)"
                            } else {
                                "No ESI processing, first char not '<'. (See feature esi_disable_xml_check)"
                            },
                        );
                        self.state = State::NotXml;
                    }
                }
            }
            State::NotXml => i = len,
            State::NotMyTag => match memchr::memchr(b'>', &chunk[i..]) {
                Some(n) => {
                    i += n + 1;
                    self.state = State::NextTag;
                }
                None => i = len,
            },
            State::NextTag => {
                self.emptytag = false;
                self.endtag = false;
                self.tag = None;
                i = self.next_tag(chunk, i);
            }
            State::StartTag => {
                if chunk[i] == b'/' {
                    self.endtag = true;
                    i += 1;
                }
                self.start_match(Table::StartTag);
            }
            State::Comment => {
                let (mut pat, mut k) = self.esicmt.unwrap_or((b"esi", 0));
                while i < len {
                    if chunk[i] != pat[k] {
                        self.esicmt = None;
                        self.until = (b"-->", 0);
                        self.state = State::Until;
                        break;
                    }
                    i += 1;
                    k += 1;
                    if k < pat.len() {
                        continue;
                    }
                    if self.remove {
                        self.diag(
                            Severity::Error,
                            "ESI 1.0 Nested <!--esi element in <esi:remove>",
                        );
                    }
                    (pat, k) = (b"-->", 0);
                    self.state = State::NextTag;
                    let at = self.at(i);
                    self.mark(false, at);
                    break;
                }
                if self.state == State::Comment || self.state == State::NextTag {
                    self.esicmt = Some((pat, k));
                }
            }
            State::Match => {
                while i < len {
                    let b = chunk[i];
                    let entries = self.table.entries();
                    let n = self.matched;
                    if b == b'>' {
                        self.on_miss(self.table.miss());
                        return i;
                    }
                    let mut extends = false;
                    let mut full = None;
                    for (word, hit) in entries {
                        if word.len() > n && word[n] == b && word[..n] == self.match_buf[..n] {
                            extends = true;
                            if word.len() == n + 1 {
                                full = Some(*hit);
                                break;
                            }
                        }
                    }
                    if !extends {
                        self.on_miss(self.table.miss());
                        return i;
                    }
                    i += 1;
                    self.match_buf[n] = b;
                    self.matched += 1;
                    if let Some(hit) = full {
                        self.on_hit(hit, i);
                        return i;
                    }
                }
            }
            State::InTag => {
                while i < len && is_lws(chunk[i]) && !self.emptytag {
                    i += 1;
                    self.canattr = true;
                }
                if i < len && chunk[i] == b'/' && !self.emptytag {
                    i += 1;
                    self.emptytag = true;
                    self.canattr = false;
                }
                if i < len && chunk[i] == b'>' {
                    i += 1;
                    let at = self.at(i);
                    self.mark(false, at);
                    self.do_tag();
                    self.in_esi_tag = false;
                    self.state = State::NextTag;
                } else if i < len && self.emptytag {
                    self.diag(Severity::Error, "XML 1.0 '>' does not follow '/' in tag");
                    self.state = State::TagError;
                } else if i < len && self.canattr && is_name_start(chunk[i]) {
                    self.state = State::Attr;
                } else if i < len {
                    self.diag(Severity::Error, "XML 1.0 Illegal attribute start char");
                    self.state = State::TagError;
                }
            }
            State::TagError => match memchr::memchr(b'>', &chunk[i..]) {
                Some(n) => {
                    i += n + 1;
                    let at = self.at(i);
                    self.mark(false, at);
                    self.in_esi_tag = false;
                    self.tag = None;
                    self.value = None;
                    self.state = State::NextTag;
                }
                None => i = len,
            },
            State::Attr => {
                if self.tag == Some(Tag::Include) {
                    self.start_match(Table::IncludeAttr);
                } else {
                    i += 1;
                    self.state = State::SkipAttr;
                }
            }
            State::SkipAttr => {
                while i < len && is_name(chunk[i]) {
                    i += 1;
                }
                if i < len {
                    let b = chunk[i];
                    if b == b'=' {
                        i += 1;
                        self.wanted = None;
                        self.state = State::AttrDelim;
                    } else if b == b'>' || b == b'/' || is_sp(b) {
                        self.state = State::InTag;
                    } else {
                        self.diag(Severity::Error, "XML 1.0 Illegal attr char");
                        self.state = State::TagError;
                    }
                }
            }
            State::AttrDelim => {
                let b = chunk[i];
                if b == b'"' || b == b'\'' {
                    self.delim = b;
                    i += 1;
                    self.state = State::AttrVal;
                } else if !is_sp(b) {
                    self.delim = b' ';
                    self.state = State::AttrVal;
                } else {
                    self.diag(Severity::Error, "XML 1.0 Illegal attribute delimiter");
                    self.state = State::TagError;
                }
                if self.state == State::AttrVal && self.wanted.is_some() {
                    self.value = Some(Vec::new());
                    self.value_too_long = false;
                }
            }
            State::AttrVal => {
                let start = i;
                while i < len
                    && chunk[i] != b'>'
                    && chunk[i] != self.delim
                    && (self.delim != b' ' || !is_sp(chunk[i]))
                {
                    i += 1;
                }
                if let Some(value) = &mut self.value {
                    let room = MAX_ATTR.saturating_sub(value.len());
                    let piece = &chunk[start..i];
                    if piece.len() > room {
                        self.value_too_long = true;
                    }
                    value.extend_from_slice(&piece[..piece.len().min(room)]);
                }
                if i < len && chunk[i] == b'>' {
                    self.diag(Severity::Error, "XML 1.0 Missing end attribute delimiter");
                    self.state = State::TagError;
                    self.delim = 0;
                    self.value = None;
                } else if i < len {
                    self.delim = 0;
                    i += 1;
                    self.state = State::InTag;
                    if let Some(value) = self.value.take() {
                        self.do_attr(value);
                    }
                }
            }
            State::Until => {
                let (pat, mut k) = self.until;
                while i < len {
                    let b = chunk[i];
                    i += 1;
                    if b != pat[k] {
                        k = 0;
                    } else {
                        k += 1;
                        if k == pat.len() {
                            self.state = State::NextTag;
                            break;
                        }
                    }
                }
                self.until = (pat, k);
            }
        }
        i
    }

    /// Hunts for the next `<`, watching for the end of an open `<!--esi` comment.
    fn next_tag(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
        while i < len && chunk[i] != b'<' {
            let Some((pat, k)) = self.esicmt else {
                i = memchr::memchr(b'<', &chunk[i..]).map_or(len, |n| i + n);
                break;
            };
            if chunk[i] != pat[k] {
                i += 1;
                self.esicmt = Some((pat, 0));
                continue;
            }
            if !self.remove && k == 0 {
                let at = self.at(i);
                self.mark(true, at);
            }
            i += 1;
            if k + 1 == pat.len() {
                self.esi_found = true;
                self.esicmt = None;
                let at = self.at(i);
                self.mark(false, at);
            } else {
                self.esicmt = Some((pat, k + 1));
            }
        }
        if i < len {
            if !self.remove {
                let at = self.at(i);
                self.mark(true, at);
            }
            i += 1;
            self.state = State::StartTag;
        }
        i
    }

    fn after_start(&self) -> State {
        if self.options.xml_check {
            State::TestXml
        } else {
            State::NextTag
        }
    }

    fn start_match(&mut self, table: Table) {
        self.table = table;
        self.matched = 0;
        self.state = State::Match;
    }

    fn on_hit(&mut self, hit: Hit, i: usize) {
        self.matched = 0;
        match hit {
            Hit::Comment => self.state = State::Comment,
            Hit::Cdata => {
                self.until = (b"]]>", 0);
                self.state = State::Until;
            }
            Hit::EsiTag => {
                self.in_esi_tag = true;
                self.esi_found = true;
                let at = self.at(i);
                self.mark(false, at);
                self.start_match(Table::Esi);
            }
            Hit::Include => {
                if self.remove {
                    self.diag(
                        Severity::Error,
                        "ESI 1.0 <esi:include> element nested in <esi:remove>",
                    );
                    self.state = State::TagError;
                } else if self.endtag {
                    self.diag(Severity::Error, "ESI 1.0 </esi:include> illegal end-tag");
                    self.state = State::TagError;
                } else {
                    self.tag = Some(Tag::Include);
                    self.include = PendingInclude::default();
                    self.state = State::InTag;
                }
            }
            Hit::Remove => {
                self.tag = Some(Tag::Remove);
                self.state = State::InTag;
            }
            Hit::EsiComment => {
                if self.remove {
                    self.diag(
                        Severity::Error,
                        "ESI 1.0 <esi:comment> element nested in <esi:remove>",
                    );
                    self.state = State::TagError;
                } else if self.endtag {
                    self.diag(Severity::Error, "ESI 1.0 </esi:comment> illegal end-tag");
                    self.state = State::TagError;
                } else {
                    self.tag = Some(Tag::Comment);
                    self.state = State::InTag;
                }
            }
            Hit::Attr(wanted) => {
                self.wanted = Some(wanted);
                self.state = State::AttrDelim;
            }
        }
    }

    fn on_miss(&mut self, miss: Miss) {
        self.matched = 0;
        match miss {
            Miss::NotMyTag if self.options.ignore_other_elements => self.state = State::NextTag,
            Miss::NotMyTag => self.state = State::NotMyTag,
            Miss::Bogon => {
                self.diag(Severity::Error, "ESI 1.0 <esi:bogus> element");
                self.state = State::TagError;
            }
            Miss::SkipAttr => self.state = State::SkipAttr,
        }
    }

    /// An include attribute's value is complete.
    fn do_attr(&mut self, value: Vec<u8>) {
        if self.value_too_long {
            self.diag(
                Severity::Error,
                "ESI 1.0 <esi:include> attribute value too long",
            );
            self.state = State::TagError;
            return;
        }
        let (slot, message) = match self.wanted {
            Some(Wanted::Src) => (
                &mut self.include.src,
                "ESI 1.0 <esi:include> has multiple src= attributes",
            ),
            Some(Wanted::Alt) => (
                &mut self.include.alt,
                "ESI 1.0 <esi:include> has multiple alt= attributes",
            ),
            Some(Wanted::OnError) => (
                &mut self.include.onerror,
                "ESI 1.0 <esi:include> has multiple onerror= attributes",
            ),
            None => return,
        };
        if slot.is_some() {
            self.diag(Severity::Error, message);
            self.include = PendingInclude::default();
            self.state = State::TagError;
            return;
        }
        *slot = Some(value);
    }

    /// A tag is complete (its `>` was read).
    fn do_tag(&mut self) {
        match self.tag {
            Some(Tag::Comment) if !self.emptytag => {
                self.diag(Severity::Error, "ESI 1.0 <esi:comment> needs final '/'");
            }
            Some(Tag::Remove) => {
                if self.emptytag {
                    self.diag(Severity::Error, "ESI 1.0 <esi:remove/> not legal");
                } else if self.remove && !self.endtag {
                    self.diag(Severity::Error, "ESI 1.0 <esi:remove> already open");
                } else if !self.remove && self.endtag {
                    self.diag(Severity::Error, "ESI 1.0 <esi:remove> not open");
                } else {
                    self.remove = !self.endtag;
                }
            }
            Some(Tag::Include) => self.do_include(),
            Some(Tag::Comment) | None => {}
        }
    }

    fn do_include(&mut self) {
        if !self.emptytag {
            self.diag(Severity::Warning, "ESI 1.0 <esi:include> lacks final '/'");
        }
        let pending = std::mem::take(&mut self.include);
        let Some(src) = pending.src else {
            self.diag(Severity::Error, "ESI 1.0 <esi:include> lacks src attr");
            return;
        };
        if src.iter().any(|b| is_lws(*b)) {
            self.diag(
                Severity::Error,
                "ESI 1.0 <esi:include> has whitespace in src= attribute",
            );
            return;
        }
        let src = match resolve(&src, &self.url) {
            Ok(t) => t,
            Err(message) => {
                self.diag(Severity::Error, message);
                return;
            }
        };
        let alt = match pending.alt.map(|alt| resolve(&alt, &self.url)) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(message)) => {
                self.diag(Severity::Error, message);
                return;
            }
        };
        let continue_on_error = match pending.onerror.as_deref() {
            None => false,
            Some(b"continue") => true,
            Some(_) => {
                self.diag(
                    Severity::Warning,
                    "ESI 1.0 <esi:include> onerror= other than \"continue\" ignored",
                );
                false
            }
        };
        self.program.ops.push(Op::Include(Include {
            src,
            alt,
            continue_on_error,
        }));
    }

    /// Classifies the body bytes before `upto` that are not classified yet.
    fn mark(&mut self, verbatim: bool, upto: u64) {
        if upto > self.marked {
            self.program.push_run(verbatim, upto - self.marked);
            self.marked = upto;
        }
    }

    fn at(&self, i: usize) -> u64 {
        self.pos + i as u64
    }

    fn diag(&mut self, severity: Severity, message: &'static str) {
        match severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Note => {}
        }
        if self.diags.len() < MAX_DIAGS {
            self.diags.push(Diag {
                severity,
                offset: self.marked,
                message,
            });
        }
    }
}

/// An include URL as written (`http://host/p`, `https://host/p`, `/p` or `p`) resolved against
/// the page's target, with XML's five named entities decoded in the path, as Varnish does.
fn resolve(raw: &[u8], page: &str) -> Result<Target, &'static str> {
    if raw.iter().any(|b| b.is_ascii_control()) {
        return Err("ESI 1.0 <esi:include> has a control character in its URL");
    }
    let raw = std::str::from_utf8(raw).map_err(|_| "ESI 1.0 <esi:include> URL is not UTF-8")?;
    let (https, rest) = if let Some(rest) = strip_prefix_ci(raw, "http://") {
        (Some(false), rest)
    } else if let Some(rest) = strip_prefix_ci(raw, "https://") {
        (Some(true), rest)
    } else {
        (None, raw)
    };
    if let Some(https) = https {
        let (host, path) = match rest.find('/') {
            Some(n) => (&rest[..n], &rest[n..]),
            None => (rest, "/"),
        };
        if host.is_empty() {
            return Err("ESI 1.0 <esi:include> URL has no host");
        }
        return Ok(Target {
            host: Some(host.to_owned()),
            https,
            path: decode_entities(path),
        });
    }
    if rest.starts_with('/') {
        return Ok(Target {
            host: None,
            https: false,
            path: decode_entities(rest),
        });
    }
    // Relative: the page's path up to its last '/' before any query.
    let path_end = page.find('?').unwrap_or(page.len());
    let base = match page[..path_end].rfind('/') {
        Some(n) => &page[..=n],
        None => &page[..path_end],
    };
    let mut path = String::with_capacity(base.len() + 1 + rest.len());
    path.push_str(base);
    if !path.ends_with('/') {
        path.push('/');
    }
    path.push_str(&decode_entities(rest));
    Ok(Target {
        host: None,
        https: false,
        path,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    'outer: while let Some(n) = rest.find('&') {
        out.push_str(&rest[..n]);
        rest = &rest[n..];
        for (entity, c) in [
            ("&apos;", '\''),
            ("&quot;", '"'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&amp;", '&'),
        ] {
            if let Some(after) = rest.strip_prefix(entity) {
                out.push(c);
                rest = after;
                continue 'outer;
            }
        }
        out.push('&');
        rest = &rest[1..];
    }
    out.push_str(rest);
    out
}

/// XML's white space (Varnish's `vct_islws`).
fn is_lws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Space or tab (Varnish's `vct_issp`).
fn is_sp(b: u8) -> bool {
    matches!(b, b' ' | b'\t')
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':' || b >= 0x80
}

fn is_name(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit() || b == b'-' || b == b'.'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::esi::program::Op;

    /// What a client receives (includes shown as `[src]`), the program and the diagnostics,
    /// with the body fed in pieces of `piece` bytes.
    fn run(
        body: &[u8],
        url: &str,
        options: Options,
        piece: usize,
    ) -> (String, Option<Program>, Vec<Diag>) {
        let mut parser = Parser::new(url, options);
        for chunk in body.chunks(piece.max(1)) {
            parser.feed(chunk);
        }
        let (program, diags) = parser.finish();
        let Some(program) = program else {
            return (String::from_utf8_lossy(body).into_owned(), None, diags);
        };
        let mut out = Vec::new();
        let mut at = 0usize;
        for op in &program.ops {
            match op {
                Op::Verbatim(n) => {
                    out.extend_from_slice(&body[at..at + *n as usize]);
                    at += *n as usize;
                }
                Op::Skip(n) => at += *n as usize,
                Op::Include(inc) => out.extend_from_slice(format!("[{}]", inc.src.path).as_bytes()),
            }
        }
        assert_eq!(
            program.covered(),
            body.len() as u64,
            "the program covers the whole body"
        );
        (
            String::from_utf8_lossy(&out).into_owned(),
            Some(program),
            diags,
        )
    }

    fn out(body: &str) -> String {
        run(
            body.as_bytes(),
            "/dir/page?q=1",
            Options::default(),
            usize::MAX,
        )
        .0
    }

    fn errors(body: &str) -> Vec<&'static str> {
        run(body.as_bytes(), "/", Options::default(), usize::MAX)
            .2
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.message)
            .collect()
    }

    #[test]
    fn includes_removes_and_comments_are_replaced_and_the_rest_is_kept() {
        assert_eq!(
            out(
                "<html><esi:include src=\"/a\"/>x<esi:remove>gone</esi:remove>y<esi:comment text=\"c\"/>z</html>"
            ),
            "<html>[/a]xyz</html>"
        );
        assert_eq!(
            out("<p><!--esi <b><esi:include src='/f'/></b> -->."),
            "<p> <b>[/f]</b> ."
        );
    }

    #[test]
    fn comments_and_cdata_are_passed_through_unparsed() {
        let body = "<a><!-- <esi:include src=\"/no\"/> --><![CDATA[<esi:include src=\"/no\"/>]]><esi:include src=\"/yes\"/>";
        assert_eq!(
            out(body),
            "<a><!-- <esi:include src=\"/no\"/> --><![CDATA[<esi:include src=\"/no\"/>]]>[/yes]"
        );
    }

    #[test]
    fn a_body_without_esi_has_no_program() {
        assert!(
            run(b"<html>plain</html>", "/", Options::default(), 7)
                .1
                .is_none()
        );
    }

    #[test]
    fn a_body_not_starting_with_lt_is_not_parsed_unless_the_check_is_off() {
        let body = b"  text <esi:include src=\"/x\"/>";
        let (_, program, diags) = run(body, "/", Options::default(), usize::MAX);
        assert!(program.is_none());
        assert_eq!(diags[0].severity, Severity::Note);
        let off = Options {
            xml_check: false,
            ..Options::default()
        };
        assert_eq!(run(body, "/", off, usize::MAX).0, "  text [/x]");
    }

    #[test]
    fn varnish_e00010_other_elements_ignored_when_asked() {
        let body = b"\n\t\t<f<esi?\n\t\t<esi:remove>\n\t\t\tbar\n\t\t</esi:remove>\n\t\tfoo\n\t";
        let ignore = Options {
            ignore_other_elements: true,
            ..Options::default()
        };
        let (text, _, diags) = run(body, "/", ignore, 1);
        assert_eq!(text, "\n\t\t<f<esi?\n\t\t\n\t\tfoo\n\t");
        assert!(
            diags.iter().all(|d| d.severity != Severity::Error),
            "{diags:?}"
        );
        // Without it the `<f` element runs to the first `>`: the remove's end tag is stray.
        let (_, _, diags) = run(body, "/", Options::default(), usize::MAX);
        assert!(diags.iter().any(|d| d.severity == Severity::Error));
    }

    #[test]
    fn a_byte_order_mark_is_skipped_when_asked() {
        let body = b"\xEF\xBB\xBF<esi:include src=\"/x\"/>";
        assert!(run(body, "/", Options::default(), usize::MAX).1.is_none());
        let bom = Options {
            remove_bom: true,
            ..Options::default()
        };
        assert_eq!(run(body, "/", bom, 1).0, "[/x]");
    }

    #[test]
    fn include_urls_resolve_as_varnish_resolves_them() {
        let (_, program, _) = run(
            b"<esi:include src=\"http://Other.example/x?a=1&amp;b=2\"/><esi:include src=\"https://s.example\"/>\
              <esi:include src=\"frag/a\"/><esi:include src=\"/abs\" alt=\"alt/b\" onerror=\"continue\"/>",
            "/dir/page?q=/x",
            Options::default(),
            usize::MAX,
        );
        let incs: Vec<_> = program
            .as_ref()
            .map(|p| p.includes().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            incs[0].src,
            Target {
                host: Some("Other.example".into()),
                https: false,
                path: "/x?a=1&b=2".into()
            }
        );
        assert_eq!(
            incs[1].src,
            Target {
                host: Some("s.example".into()),
                https: true,
                path: "/".into()
            }
        );
        assert_eq!(incs[2].src.path, "/dir/frag/a");
        assert_eq!(incs[3].src.path, "/abs");
        assert_eq!(
            incs[3].alt.as_ref().map(|t| t.path.as_str()),
            Some("/dir/alt/b")
        );
        assert!(incs[3].continue_on_error);
        assert!(!incs[0].continue_on_error);
        // A target without a '/' (varnishtest's "bar") gets one added, as in Varnish.
        let (text, _, _) = run(b"<esi:include src=\"foo\"/>", "bar", Options::default(), 1);
        assert_eq!(text, "[bar/foo]");
    }

    #[test]
    fn malformed_esi_is_reported_with_varnishs_words_and_dropped() {
        assert_eq!(errors("<esi:bogus/>"), ["ESI 1.0 <esi:bogus> element"]);
        assert_eq!(
            errors("<esi:include/>"),
            ["ESI 1.0 <esi:include> lacks src attr"]
        );
        assert_eq!(
            errors("<esi:include src=\"/a b\"/>"),
            ["ESI 1.0 <esi:include> has whitespace in src= attribute"]
        );
        assert_eq!(
            errors("<esi:include src=\"/a\" src=\"/b\"/>"),
            ["ESI 1.0 <esi:include> has multiple src= attributes"]
        );
        assert_eq!(errors("<esi:remove/>"), ["ESI 1.0 <esi:remove/> not legal"]);
        assert_eq!(errors("</esi:remove>"), ["ESI 1.0 <esi:remove> not open"]);
        assert_eq!(
            errors("<esi:include src=\"/a\n"),
            ["VEP ended inside a tag"]
        );
        assert_eq!(
            errors("<esi:include src=\"/a\x01\"/>"),
            ["ESI 1.0 <esi:include> has a control character in its URL"]
        );
        let long = format!("<esi:include src=\"/{}\"/>", "a".repeat(MAX_ATTR + 1));
        assert_eq!(
            errors(&long),
            ["ESI 1.0 <esi:include> attribute value too long"]
        );
    }

    #[test]
    fn varnish_e00001_remove_with_nested_tags() {
        let body = "\n\t\t<esi:remove>\n\t\tThis is a test: Unseen University\n\t\t<esi:include src=\"trick question\">\n\t\t<!--esi XXX -->\n\t\t</esi:remove>\n\t\t<esX>This is a test: Hello world\n\t";
        let off = Options {
            xml_check: true,
            remove_bom: false,
            ignore_other_elements: false,
        };
        let (text, _, diags) = run(body.as_bytes(), "/", off, usize::MAX);
        assert_eq!(text.len(), 40);
        let errs: Vec<_> = diags.iter().map(|d| d.message).collect();
        assert_eq!(
            errs,
            [
                "ESI 1.0 <esi:include> element nested in <esi:remove>",
                "ESI 1.0 Nested <!--esi element in <esi:remove>"
            ]
        );
    }

    #[test]
    fn the_result_does_not_depend_on_where_the_body_is_cut() {
        let bodies: [&[u8]; 4] = [
            b"<html><esi:include src=\"/a\" alt='/b' onerror=continue /><!--esi <esi:remove>x</esi:remove> -->\
              <![CDATA[ <esi: ]]><!-- c --><esi:comment x/><esi:bogus>tail<esi:include\n src=/c\n/>",
            b"<1></esi:comment foo><1><2><esi:comment / ><esi:comment doo><2><3><esi:remove foo=\"bar\"></esi:remove><3>",
            b"<x><!--esi <!-- nested --> --> <!---->-->",
            b"<esi:remove><esi:include src=\"/x\"/></esi:remove><esi:include  k?=./><esi:include  src= />",
        ];
        for body in bodies {
            let whole = run(body, "/p/q", Options::default(), usize::MAX);
            for piece in 1..body.len() {
                let cut = run(body, "/p/q", Options::default(), piece);
                assert_eq!(cut.1, whole.1, "program, pieces of {piece}");
                assert_eq!(cut.2.len(), whole.2.len(), "diagnostics, pieces of {piece}");
            }
        }
    }

    #[test]
    fn diagnostics_are_bounded_but_all_counted() {
        let body = "<x>".to_owned() + &"<esi:bogus/>".repeat(100);
        let mut parser = Parser::new("/", Options::default());
        parser.feed(body.as_bytes());
        assert_eq!(parser.errors(), 100);
        assert_eq!(parser.diags().len(), MAX_DIAGS);
    }
}
