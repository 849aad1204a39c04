//! What the parser does at the ESI words it knows: the match tables (`esi:`, `include`,
//! `src=`...), and the tags and attributes once read — `<esi:include>` becomes an include
//! step, `<esi:remove>` opens and closes a removed run, malformed ones are reported.

use super::syntax::{Hit, Miss, PendingInclude, State, Table, Tag, Wanted, is_lws};
use super::url::{HTTPS_AS_HTTP, is_https, resolve};
use super::{Include, Op, Parser, Severity};

impl Parser {
    pub(super) fn on_hit(&mut self, hit: Hit, i: usize) {
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

    pub(super) fn on_miss(&mut self, miss: Miss) {
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
    pub(super) fn do_attr(&mut self, value: Vec<u8>) {
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
    pub(super) fn do_tag(&mut self) {
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

    pub(super) fn do_include(&mut self) {
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
        if is_https(&src) {
            self.diag(Severity::Warning, HTTPS_AS_HTTP);
        }
        let src = match resolve(&src, &self.url) {
            Ok(t) => t,
            Err(message) => {
                self.diag(Severity::Error, message);
                return;
            }
        };
        if pending.alt.as_deref().is_some_and(is_https) {
            self.diag(Severity::Warning, HTTPS_AS_HTTP);
        }
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
}
