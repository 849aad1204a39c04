//! FastCGI 1.0 as a web server speaks it to a responder such as PHP-FPM (issue 31): the
//! records on the wire (`record`), the CGI/1.1 parameters built from a request (`params`)
//! and the CGI response head at the start of STDOUT (`head`), and which file names are PHP
//! scripts (`php`: the files origin never sends them as text). Pure codecs with no I/O and
//! nothing from the crate above `http`; the FastCGI origin kind that runs them over pooled
//! connections is `backend/fastcgi/`, behind the origin seam (ARCHITECTURE.md).

pub mod head;
pub mod params;
pub mod php;
pub mod record;
