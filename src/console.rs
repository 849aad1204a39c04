//! The terminal tools, `shellac stat`, `shellac top` and `shellac log`: they read the admin
//! listener (`/stats/live`, `/top`, `/log/stream`) and render plain text. Rendering is separate
//! from I/O so it can be tested.

mod inspect;
mod log;
mod stat;
mod text;
mod top;

pub use inspect::{inspect, render_inspect};
pub use log::{log, render_log_line};
pub use stat::{render_site_stat, render_sites_table, render_stat, stat};
pub use text::encode;
pub use top::{render_top, top};

#[cfg(test)]
mod tests;
