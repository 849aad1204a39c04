//! VCL's `beresp.filters` and `resp.filters` (Varnish 6+): the fetch and delivery processor
//! lists as Varnish names them, read from what Shellac's filter stages will do and set onto
//! them. Fetch: `gunzip`, `gzip`, `testgunzip`, `esi`, `esi_gzip` map onto the fetch chain's
//! gzip filters and ESI parsing (`proxy/coding.rs`, `filter/esi/`). Delivery: `esi`, `gunzip`,
//! `range` map onto the assembly, the decoding for the client and the Range answer.

use http::StatusCode;
use http::header::{self, HeaderMap};

/// The fetch processors Varnish has (its VFPs), by name.
const FETCH: &[&str] = &["gunzip", "gzip", "testgunzip", "esi", "esi_gzip"];

/// The delivery processors Varnish has (its VDPs), by name.
const DELIVER: &[&str] = &["esi", "gunzip", "range"];

/// The names of a filter list: words separated by white space. An unknown name is the
/// error Varnish gives (`Filter 'x' not found`), a VCL failure.
fn names<'a>(list: &'a str, known: &[&str]) -> Result<Vec<&'a str>, String> {
    let mut out = Vec::new();
    for name in list.split_ascii_whitespace() {
        if !known.contains(&name) {
            return Err(format!("Filter '{name}' not found"));
        }
        out.push(name);
    }
    Ok(out)
}

/// How the body comes from the backend, by its `Content-Encoding`: gzip, none (identity),
/// or another coding (nothing gzip-related applies).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Came {
    Gzip,
    Identity,
    Other,
}

fn came(headers: &HeaderMap) -> Came {
    match headers.get(header::CONTENT_ENCODING) {
        None => Came::Identity,
        Some(v) if v.as_bytes().eq_ignore_ascii_case(b"gzip") => Came::Gzip,
        Some(_) => Came::Other,
    }
}

/// A response without a body to filter: 204, 304, 1xx or `Content-Length: 0`.
fn no_body(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || status.is_informational()
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes().trim_ascii() == b"0")
}

/// The fetch switches of `beresp` (`do_gzip`, `do_gunzip`, `do_esi`) and the list that
/// decides them once set.
#[derive(Debug, Clone, Default)]
pub(in crate::proxy) struct Fetch {
    pub do_gzip: bool,
    pub do_gunzip: bool,
    pub do_esi: bool,
    /// `beresp.filters` as the program set it (`None`: the default list).
    pub filters: Option<String>,
    /// Varnish's `http_gzip_support` (`[compression] enabled`): `do_gzip` / `do_gunzip`
    /// count only with it, a set list whatever it is.
    pub gzip_support: bool,
}

impl Fetch {
    /// Whether `do_gzip` / `do_gunzip` are run (`http_gzip_support`, or a list set).
    pub fn switches_apply(&self) -> bool {
        self.gzip_support || self.filters.is_some()
    }
}

/// `beresp.filters` before the program set it: the list Varnish builds from `do_gzip`,
/// `do_gunzip`, `do_esi`, the response's coding and `http_gzip_support`.
pub(super) fn fetch_default(status: StatusCode, headers: &HeaderMap, b: &Fetch) -> String {
    let gzip_support = b.gzip_support;
    if no_body(status, headers) {
        return String::new();
    }
    let coding = came(headers);
    let is_gzip = coding == Came::Gzip;
    let do_gunzip = gzip_support && b.do_gunzip && is_gzip;
    let do_gzip = gzip_support && b.do_gzip && coding == Came::Identity;
    let mut out: Vec<&str> = Vec::new();
    if do_gunzip || (is_gzip && b.do_esi) {
        out.push("gunzip");
    }
    if b.do_esi {
        out.push(if do_gzip || (is_gzip && !do_gunzip) {
            "esi_gzip"
        } else {
            "esi"
        });
    } else {
        if do_gzip {
            out.push("gzip");
        }
        if is_gzip && !do_gunzip {
            out.push("testgunzip");
        }
    }
    out.join(" ")
}

/// `set beresp.filters = list`: the list run over the body as it comes, mapped onto the
/// switches Shellac's fetch chain is built from. A filter that does not apply to the body
/// as it is at that point of the list is skipped (`gunzip` of identity, `gzip` of gzip), as
/// Varnish's do; what is stored is the coding the list ends in: gzip from identity is
/// `do_gzip`, identity from gzip `do_gunzip`. `esi` and `esi_gzip` parse the page for ESI
/// (Shellac stores an ESI page identity and gzips the assembled page for a client that
/// takes gzip, so both store the same page).
pub(super) fn set_fetch(headers: &HeaderMap, b: &mut Fetch, list: String) -> Result<(), String> {
    let mut coding = came(headers);
    let start = coding;
    let mut esi = false;
    for name in names(&list, FETCH)? {
        match (name, coding) {
            ("gunzip", Came::Gzip) => coding = Came::Identity,
            ("gzip", Came::Identity) => coding = Came::Gzip,
            ("esi" | "esi_gzip", _) => esi = true,
            _ => {}
        }
    }
    b.do_esi = esi;
    b.do_gzip = start == Came::Identity && coding == Came::Gzip;
    b.do_gunzip = start == Came::Gzip && coding == Came::Identity;
    b.filters = Some(list);
    Ok(())
}

/// Setting `beresp.do_gzip`, `do_gunzip` or `do_esi` once `beresp.filters` was set is a VCL
/// error, as in Varnish (the list decides).
pub(super) fn check_fetch_switch(b: &Fetch, name: &str) -> Result<(), String> {
    match b.filters {
        Some(_) => Err(format!(
            "beresp.{name} is invalid after beresp.filters was set"
        )),
        None => Ok(()),
    }
}

/// What the delivery of a response does, known before vcl_deliver runs (`resp.filters`).
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::proxy) struct Delivering {
    /// The page is assembled from its ESI program.
    pub esi: bool,
    /// The body is decoded from gzip for this client (an ESI page: it came gzip from the
    /// origin and the client does not take gzip, as Varnish lists it).
    pub gunzip: bool,
    /// The request's `Range` is answered from the body.
    pub range: bool,
}

impl Delivering {
    /// The list Varnish reads before the program set it.
    pub fn list(&self) -> String {
        let mut out: Vec<&str> = Vec::new();
        if self.esi {
            out.push("esi");
        }
        if self.gunzip {
            out.push("gunzip");
        }
        if self.range {
            out.push("range");
        }
        out.join(" ")
    }
}

/// `resp.filters` of one response: what its delivery does, and the list the program set.
#[derive(Debug, Clone, Default)]
pub(in crate::proxy) struct Deliver {
    pub delivering: Delivering,
    /// `resp.filters` as the program set it (`None`: the default list).
    pub filters: Option<String>,
    /// The list added `gunzip` to a gzip body: it is decoded after vcl_deliver.
    pub gunzip_added: bool,
}

/// `resp.filters` as read: what was set, else the default list.
pub(super) fn deliver_list(resp: &Deliver, esi: bool) -> String {
    match &resp.filters {
        Some(list) => list.clone(),
        None => Delivering {
            esi,
            ..resp.delivering
        }
        .list(),
    }
}

/// `set resp.filters = list`: `esi` present or absent turns the page's assembly on or off
/// (returned: whether it is assembled); `gunzip` added to a gzip body for a client that
/// takes gzip decodes it (`Deliver::gunzip_added`). Shellac decides the decoding and the Range
/// answer before vcl_deliver, so a list that takes `gunzip` or `range` away from a response
/// that has them is a VCL error, not a list silently not followed.
pub(super) fn set_deliver(
    resp: &mut Deliver,
    headers: &HeaderMap,
    list: String,
) -> Result<bool, String> {
    let names = names(&list, DELIVER)?;
    let has = |n: &str| names.contains(&n);
    if resp.delivering.gunzip && !has("gunzip") {
        return Err(
            "resp.filters: Shellac decodes the body for this client before vcl_deliver; \
             it cannot be sent gzip to a client that does not take it"
                .to_string(),
        );
    }
    if resp.delivering.range && !has("range") {
        return Err(
            "resp.filters: Shellac answers the request's Range before vcl_deliver; \
             remove req.http.Range in vcl_recv instead"
                .to_string(),
        );
    }
    resp.gunzip_added = has("gunzip") && !resp.delivering.gunzip && came(headers) == Came::Gzip;
    let esi = has("esi");
    resp.filters = Some(list);
    Ok(esi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn fields(gzip: bool) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        headers
    }

    fn fetch() -> Fetch {
        Fetch {
            gzip_support: true,
            ..Fetch::default()
        }
    }

    #[test]
    fn the_default_fetch_list_is_varnishs() {
        let ok = StatusCode::OK;
        let gz = fields(true);
        let mut b = fetch();
        assert_eq!(fetch_default(ok, &gz, &b), "testgunzip");
        b.do_esi = true;
        assert_eq!(fetch_default(ok, &gz, &b), "gunzip esi_gzip");
        b.do_gunzip = true;
        assert_eq!(fetch_default(ok, &gz, &b), "gunzip esi");
        let mut id = fields(false);
        let mut b = fetch();
        assert_eq!(fetch_default(ok, &id, &b), "");
        b.do_gzip = true;
        assert_eq!(fetch_default(ok, &id, &b), "gzip");
        b.gzip_support = false;
        assert_eq!(fetch_default(ok, &id, &b), "");
        b.gzip_support = true;
        b.do_esi = true;
        assert_eq!(fetch_default(ok, &id, &b), "esi_gzip");
        id.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        assert_eq!(fetch_default(ok, &id, &b), "");
        assert_eq!(fetch_default(StatusCode::NO_CONTENT, &gz, &b), "");
    }

    #[test]
    fn a_set_fetch_list_ends_in_the_coding_stored() {
        let (id, gz) = (fields(false), fields(true));
        let mut b = fetch();
        set_fetch(&id, &mut b, "gzip gunzip gzip gunzip gzip".into()).unwrap();
        assert!(b.do_gzip && !b.do_gunzip && !b.do_esi);
        let mut b = fetch();
        set_fetch(&gz, &mut b, "gunzip".into()).unwrap();
        assert!(b.do_gunzip && !b.do_gzip);
        let mut b = fetch();
        set_fetch(&gz, &mut b, "gzip testgunzip".into()).unwrap();
        assert!(!b.do_gunzip && !b.do_gzip);
        let mut b = fetch();
        set_fetch(&gz, &mut b, " gunzip  esi ".into()).unwrap();
        assert!(b.do_esi && b.do_gunzip);
        assert_eq!(b.filters.as_deref(), Some(" gunzip  esi "));
        assert!(check_fetch_switch(&b, "do_gzip").is_err());
        let mut b = fetch();
        assert_eq!(
            set_fetch(&id, &mut b, "gzip rot13".into()),
            Err("Filter 'rot13' not found".to_string())
        );
        assert!(check_fetch_switch(&b, "do_gzip").is_ok());
    }

    #[test]
    fn the_delivery_list_is_read_and_set() {
        let all = Delivering {
            esi: true,
            gunzip: true,
            range: true,
        };
        let mut r = Deliver {
            delivering: all,
            ..Deliver::default()
        };
        let id = fields(false);
        assert_eq!(deliver_list(&r, true), "esi gunzip range");
        assert_eq!(deliver_list(&r, false), "gunzip range");
        assert!(set_deliver(&mut r, &id, "gunzip".into()).is_err());
        assert_eq!(set_deliver(&mut r, &id, "gunzip range".into()), Ok(false));
        assert_eq!(deliver_list(&r, true), "gunzip range");
        let mut r = Deliver::default();
        assert_eq!(deliver_list(&r, false), "");
        assert_eq!(
            set_deliver(&mut r, &fields(true), "esi gunzip".into()),
            Ok(true)
        );
        assert!(r.gunzip_added);
        assert!(set_deliver(&mut r, &id, "rot13".into()).is_err());
    }
}
