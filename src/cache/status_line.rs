//! A stored object's own status line, when it is not its status's plain one: VCL's wide status
//! (Varnish keeps up to 65535 in `beresp.status`, sends the last three digits, and stores the
//! whole number: a hit's vcl_deliver sees 1200 where the client gets 200) and a reason phrase
//! other than the status's own (`beresp.reason`, a backend's `200 Okay`). One stored field,
//! [`FIELD`], written only when one of the two differs, never sent to a client or taken from a
//! backend, so it travels with the object through every tier.

use http::{HeaderValue, StatusCode};

/// The stored field: `<wide status> <reason phrase>`.
pub const FIELD: &str = "shellac-status";

/// The longest backend reason phrase stored with an object (for a longer one the miss and
/// its hits send the status's own: delivery sends only a stored phrase).
pub const MAX_BACKEND_REASON: usize = 128;

/// What the field says: the status as VCL saw it and the reason phrase sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusLine {
    /// The status as VCL left it, up to 65535; its last three digits are the object's status.
    pub wide: u16,
    /// The reason phrase (may be empty).
    pub reason: String,
}

impl StatusLine {
    /// The field's value for an object of `status` whose VCL status was `wide` and whose
    /// reason phrase is `reason` (`None`: the status's own); `None` when both are the plain
    /// ones (nothing stored), or when the reason cannot be a field value.
    pub fn value(status: StatusCode, wide: u16, reason: Option<&str>) -> Option<HeaderValue> {
        let own = status.canonical_reason().unwrap_or("");
        let reason = reason.unwrap_or(own);
        if wide == status.as_u16() && reason == own {
            return None;
        }
        HeaderValue::from_str(&format!("{wide} {reason}")).ok()
    }

    /// Reads the field's value for an object of `status`; `None` when it is not one Shellac
    /// wrote for that status (a wide status whose last three digits are another status).
    pub fn parse(value: &[u8], status: StatusCode) -> Option<StatusLine> {
        let value = std::str::from_utf8(value).ok()?;
        let (wide, reason) = value.split_once(' ').unwrap_or((value, ""));
        let wide: u16 = wide.parse().ok()?;
        (wide % 1000 == status.as_u16()).then(|| StatusLine {
            wide,
            reason: reason.to_string(),
        })
    }

    /// The status line `object` was stored with, when it has one of its own.
    pub fn of(object: &super::Object) -> Option<StatusLine> {
        let value = object.headers.values(FIELD).next()?;
        StatusLine::parse(value, object.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written only when the wide status or the reason differ from the plain ones, and read
    /// back as written (trunk v00050: `1200 OK from v_b_e`).
    #[test]
    fn written_when_it_differs_and_read_back() {
        let ok = StatusCode::OK;
        assert_eq!(StatusLine::value(ok, 200, None), None);
        assert_eq!(StatusLine::value(ok, 200, Some("OK")), None);
        let v = StatusLine::value(ok, 1200, Some("OK from v_b_e")).unwrap();
        assert_eq!(v, "1200 OK from v_b_e");
        assert_eq!(
            StatusLine::parse(v.as_bytes(), ok),
            Some(StatusLine {
                wide: 1200,
                reason: "OK from v_b_e".into()
            })
        );
        let v = StatusLine::value(ok, 200, Some("Okay")).unwrap();
        assert_eq!(v, "200 Okay");
        let v = StatusLine::value(StatusCode::MOVED_PERMANENTLY, 1301, None).unwrap();
        assert_eq!(v, "1301 Moved Permanently");
        // An empty reason is a reason of its own.
        assert_eq!(StatusLine::value(ok, 200, Some("")).unwrap(), "200 ");
        assert_eq!(
            StatusLine::parse(b"200 ", ok).map(|s| s.reason),
            Some(String::new())
        );
        // Not for this status, not a number: not Shellac's.
        assert_eq!(StatusLine::parse(b"1404 Not Found", ok), None);
        assert_eq!(StatusLine::parse(b"abc OK", ok), None);
        assert_eq!(StatusLine::parse(b"70000 OK", ok), None);
    }
}
