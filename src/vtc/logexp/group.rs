//! The records `GET /vsl` gives (one a line: `SEQ VXID SIDE TAG DATA`) and their grouping as
//! varnishlog's `-g`: `raw` (each record alone), `vxid` (a transaction's records once it
//! ends), `request` / `session` (a client request with the transactions it began — its
//! backend requests, restarts, ESI includes — once all of them ended; Shellac keeps no
//! session records, so `session` groups as `request`).

use std::collections::HashMap;

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub vxid: u64,
    /// `c` (client), `b` (backend) or `-`.
    pub side: char,
    pub tag: String,
    pub data: String,
}

impl Record {
    /// One line of `GET /vsl` (`None`: not a record line).
    pub fn parse(line: &str) -> Option<Record> {
        let mut it = line.splitn(5, ' ');
        let seq = it.next()?.parse().ok()?;
        let vxid = it.next()?.parse().ok()?;
        let side = it.next()?.chars().next()?;
        let tag = it.next()?.to_string();
        let raw = it.next().unwrap_or("");
        let mut data = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                data.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => data.push('\n'),
                Some('r') => data.push('\r'),
                Some(o) => data.push(o),
                None => data.push('\\'),
            }
        }
        Some(Record {
            seq,
            vxid,
            side,
            tag,
            data,
        })
    }
}

/// How records are grouped (`-g`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    Raw,
    Vxid,
    Request,
}

impl Grouping {
    pub fn parse(s: &str) -> Option<Grouping> {
        match s {
            "raw" => Some(Grouping::Raw),
            "vxid" => Some(Grouping::Vxid),
            "request" | "session" => Some(Grouping::Request),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Tx {
    records: Vec<Record>,
    parent: Option<u64>,
    /// Transactions this one began (by their `Begin`) or announced (`Link`).
    children: Vec<u64>,
    ended: bool,
}

/// Transactions being gathered.
pub struct Grouper {
    grouping: Grouping,
    open: HashMap<u64, Tx>,
}

impl Grouper {
    pub fn new(grouping: Grouping) -> Grouper {
        Grouper {
            grouping,
            open: HashMap::new(),
        }
    }

    /// Takes a record; returns the groups it completed, each its records in order (a
    /// request's own first, then those of the transactions it began, in order).
    pub fn push(&mut self, r: Record) -> Vec<Vec<Record>> {
        if self.grouping == Grouping::Raw {
            return vec![vec![r]];
        }
        let vxid = r.vxid;
        let end = r.tag == "End";
        if self.grouping == Grouping::Request {
            self.relate(&r);
        }
        self.open.entry(vxid).or_default().records.push(r);
        if !end {
            return Vec::new();
        }
        if let Some(t) = self.open.get_mut(&vxid) {
            t.ended = true;
        }
        if self.grouping == Grouping::Vxid {
            return self
                .open
                .remove(&vxid)
                .map(|t| vec![t.records])
                .unwrap_or_default();
        }
        let root = self.root(vxid);
        if !self.complete(root) {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.take(root, &mut out);
        vec![out]
    }

    /// A `Begin` naming its parent, a `Link` naming a child.
    fn relate(&mut self, r: &Record) {
        let mut words = r.data.split(' ');
        match r.tag.as_str() {
            "Begin" => {
                let _kind = words.next();
                let parent = words.next().and_then(|p| p.parse::<u64>().ok());
                if let Some(p) = parent.filter(|p| *p != 0 && self.open.contains_key(p)) {
                    self.open.entry(r.vxid).or_default().parent = Some(p);
                    let siblings = &mut self.open.entry(p).or_default().children;
                    if !siblings.contains(&r.vxid) {
                        siblings.push(r.vxid);
                    }
                }
            }
            "Link" => {
                let _kind = words.next();
                if let Some(c) = words.next().and_then(|c| c.parse::<u64>().ok()) {
                    let children = &mut self.open.entry(r.vxid).or_default().children;
                    if !children.contains(&c) {
                        children.push(c);
                    }
                }
            }
            _ => {}
        }
    }

    fn root(&self, mut vxid: u64) -> u64 {
        let mut hops = 0;
        while let Some(p) = self.open.get(&vxid).and_then(|t| t.parent) {
            vxid = p;
            hops += 1;
            if hops > 64 {
                break;
            }
        }
        vxid
    }

    fn complete(&self, vxid: u64) -> bool {
        let Some(t) = self.open.get(&vxid) else {
            return false;
        };
        t.ended && t.children.iter().all(|c| self.complete(*c))
    }

    fn take(&mut self, vxid: u64, out: &mut Vec<Record>) {
        let Some(t) = self.open.remove(&vxid) else {
            return;
        };
        out.extend(t.records);
        for c in t.children {
            self.take(c, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, vxid: u64, tag: &str, data: &str) -> Record {
        Record {
            seq,
            vxid,
            side: 'c',
            tag: tag.into(),
            data: data.into(),
        }
    }

    #[test]
    fn a_line_parses_with_its_escapes() {
        let r = Record::parse("7 1002 b ESI_xmlerror ERR: a\\nb \\\\ c").unwrap();
        assert_eq!((r.seq, r.vxid, r.side), (7, 1002, 'b'));
        assert_eq!(r.tag, "ESI_xmlerror");
        assert_eq!(r.data, "ERR: a\nb \\ c");
        assert_eq!(Record::parse("3 1001 c End ").unwrap().data, "");
    }

    #[test]
    fn a_request_groups_with_the_fetch_it_began() {
        let mut g = Grouper::new(Grouping::Request);
        assert!(g.push(rec(1, 1001, "Begin", "req 0 rxreq")).is_empty());
        assert!(g.push(rec(2, 1001, "Link", "bereq 1002 fetch")).is_empty());
        assert!(g.push(rec(3, 1002, "Begin", "bereq 1001 fetch")).is_empty());
        assert!(
            g.push(rec(4, 1001, "End", "")).is_empty(),
            "its fetch is open"
        );
        let done = g.push(rec(5, 1002, "End", ""));
        let seqs: Vec<u64> = done[0].iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 4, 3, 5]);
        let mut v = Grouper::new(Grouping::Vxid);
        v.push(rec(1, 1001, "Begin", "req 0 rxreq"));
        v.push(rec(2, 1002, "Begin", "bereq 1001 fetch"));
        assert_eq!(v.push(rec(3, 1002, "End", ""))[0].len(), 2);
    }
}
