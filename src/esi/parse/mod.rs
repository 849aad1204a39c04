//! The ESI parser: Edge Side Includes found in a body while it is fetched, turned into a
//! [`Program`] (verbatim runs, skipped runs, includes) that is stored with the object, so a
//! hit never parses again.
//!
//! The dialect is Varnish's (its VEP parser: `<esi:include>`, `<esi:remove>`,
//! `<esi:comment>`, `<!--esi ... -->`, comments and CDATA passed through untouched, the same
//! XML leniency and the same error words, so `ESI_xmlerror` lines read alike), plus W3C ESI
//! 1.0's `alt=` and `onerror="continue"`, and `https://` includes kept (with Varnish's warning, as
//! its `+esi_ignore_https` does) instead of ignored.
//! The parser is a byte-level state machine fed with chunks of any size: the result does not
//! depend on where the chunks are cut. It keeps no more of the body than one attribute value
//! (at most [`MAX_ATTR`] bytes) and a 10-byte match buffer, and it never fails: malformed
//! markup is reported as a [`Diag`] and passed through or dropped as Varnish would.

mod machine;
mod syntax;
mod tags;
#[cfg(test)]
mod tests;
mod url;

use super::program::{Include, Op, Program, Target};
use syntax::{PendingInclude, State, Table, Tag, Wanted};

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
    /// Where the parser last changed between verbatim and skipped bytes (Varnish's `o_last`:
    /// the number its `ESI_xmlerror` records give after "after").
    pub offset: u64,
    /// Varnish's wording, e.g. `ESI 1.0 <esi:include> lacks src attr`.
    pub message: &'static str,
}

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
    /// Whether the last bytes classified were verbatim (`None`: none yet).
    last_mode: Option<bool>,
    /// Where the classification last changed between verbatim and skip (Varnish's `o_last`,
    /// the offset a diagnostic reports).
    mode_changed: u64,
    /// Bytes covered by the steps handed out by [`Parser::take_ready`].
    drained: u64,
    esi_found: bool,
    /// [`Parser::end`] ran.
    ended: bool,
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
            last_mode: None,
            mode_changed: 0,
            drained: 0,
            esi_found: false,
            ended: false,
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
        self.end_input();
        let program = (self.esi_found && !self.program.ops.is_empty()).then_some(self.program);
        (program, self.diags)
    }

    /// Bytes fed so far.
    pub fn read(&self) -> u64 {
        self.pos
    }

    /// Whether ESI markup was found so far (the body is then assembled, not sent as it is).
    pub fn found(&self) -> bool {
        self.esi_found
    }

    /// Whether the body was found not to be XML (`Options::xml_check`): it is sent as it is,
    /// whatever follows.
    pub fn not_xml(&self) -> bool {
        self.state == State::NotXml
    }

    /// For a body assembled as it is parsed (a response delivered while it is fetched): the
    /// steps over the bytes fed so far that nothing after them can change, taken out of the
    /// parser. Steps are handed out only once they would be the same whether the body turns
    /// out to hold ESI or not: while no ESI was found, only if every byte so far is sent as
    /// it is (a removed byte-order mark waits for the body's verdict). Applied one after
    /// another and followed by [`Parser::end`]'s, they walk the body as [`Parser::finish`]'s
    /// program would (or as the body itself, when it holds no ESI).
    pub fn take_ready(&mut self) -> Vec<Op> {
        // Between tags, outside `<esi:remove>` and not in the middle of a `-->`, what was
        // read is sent as it is; a body not XML is sent whole.
        if self.state == State::NotXml
            || (self.state == State::NextTag
                && !self.remove
                && self.esicmt.is_none_or(|(_, k)| k == 0))
        {
            self.mark(true, self.pos);
        }
        if !self.esi_found
            && self
                .program
                .ops
                .iter()
                .any(|op| !matches!(op, Op::Verbatim(_)))
        {
            return Vec::new();
        }
        let ops = std::mem::take(&mut self.program.ops);
        self.drained += ops
            .iter()
            .map(|op| match op {
                Op::Verbatim(n) | Op::Skip(n) => *n,
                Op::Include(_) => 0,
            })
            .sum::<u64>();
        ops
    }

    /// The end of a body assembled as it is parsed: the steps [`Parser::take_ready`] has not
    /// handed out yet (the rest of the body as it is when it held no ESI).
    pub fn end(&mut self) -> Vec<Op> {
        self.end_input();
        let ops = std::mem::take(&mut self.program.ops);
        if self.esi_found {
            return ops;
        }
        let rest = self.pos - self.drained;
        self.drained = self.pos;
        if rest == 0 {
            Vec::new()
        } else {
            vec![Op::Verbatim(rest)]
        }
    }

    /// The body's end: a tag left open is an error, the bytes not classified yet are.
    /// The body's end: a tag left open is an error (counted in [`Parser::errors`] from now
    /// on); what is left is classified. Once; [`Parser::finish`] calls it if nobody did.
    pub fn end_input(&mut self) {
        if !self.ended {
            self.ended = true;
            self.close();
        }
    }

    fn close(&mut self) {
        if !matches!(
            self.state,
            State::Start | State::TestXml | State::NotXml | State::NextTag
        ) {
            self.diag(Severity::Error, "VEP ended inside a tag");
        }
        let verbatim = !(self.remove || self.in_esi_tag);
        let end = self.pos;
        self.mark(verbatim, end);
    }

    /// Classifies the body bytes before `upto` that are not classified yet.
    fn mark(&mut self, verbatim: bool, upto: u64) {
        if upto > self.marked {
            // Varnish's `o_last`: where the last change between verbatim and skipped bytes
            // was (what its ESI_xmlerror records say "after").
            if self.last_mode.is_some_and(|m| m != verbatim) {
                self.mode_changed = self.marked;
            }
            self.last_mode = Some(verbatim);
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
                offset: self.mode_changed,
                message,
            });
        }
    }
}
