//! The parser's byte-level state machine: one state per place in the markup (before the
//! first byte, between tags, inside a tag, an attribute's value, a comment), each run on a
//! chunk from an index until it needs another state or the chunk ends.

use super::syntax::{BOM, State, Table, Tag, is_lws, is_name, is_name_start, is_sp};
use super::{MAX_ATTR, Parser, Severity};

impl Parser {
    /// Runs the current state on `chunk[i..]` (never empty); returns the next index.
    pub(super) fn step(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
        match self.state {
            State::Start => i = self.start(chunk, i),
            State::TestXml => i = self.test_xml(chunk, i),
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
            State::Comment => i = self.comment(chunk, i),
            State::Match => i = self.match_word(chunk, i),
            State::InTag => i = self.in_tag(chunk, i),
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
            State::SkipAttr => i = self.skip_attr(chunk, i),
            State::AttrDelim => i = self.attr_delim(chunk, i),
            State::AttrVal => i = self.attr_val(chunk, i),
            State::Until => i = self.until(chunk, i),
        }
        i
    }

    /// Before the first byte: a byte-order mark to remove, then the XML check.
    fn start(&mut self, chunk: &[u8], mut i: usize) -> usize {
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
        i
    }

    /// The XML check: white space, then `<` or the body is not parsed.
    fn test_xml(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// After `<!--`: `esi` makes it an ESI comment (its markers removed), else a comment passed through.
    fn comment(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// Matching the current table's words (`esi:`, `include`, `src=`...) byte by byte.
    fn match_word(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// Inside an ESI tag, between attributes: `/`, `>`, or the next attribute.
    fn in_tag(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// An attribute name the tag does not keep.
    fn skip_attr(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// After `=`: the value's delimiter.
    fn attr_delim(&mut self, chunk: &[u8], mut i: usize) -> usize {
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
        i
    }

    /// An attribute's value, kept (up to `MAX_ATTR`) when the tag wants it.
    fn attr_val(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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
        i
    }

    /// Inside a comment or CDATA: up to its end marker.
    fn until(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let len = chunk.len();
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

    pub(super) fn after_start(&self) -> State {
        if self.options.xml_check {
            State::TestXml
        } else {
            State::NextTag
        }
    }

    pub(super) fn start_match(&mut self, table: Table) {
        self.table = table;
        self.matched = 0;
        self.state = State::Match;
    }
}
