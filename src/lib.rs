//! Shellac: a caching HTTP reverse proxy.
//!
//! See ARCHITECTURE.md for the bird's-eye view and the request path.

pub mod acme;
pub mod admin;
pub mod backend;
pub mod cache;
pub mod client;
pub mod clock;
pub mod config;
pub mod console;
pub mod demo;
pub mod dist;
pub mod esi;
pub mod fastcgi;
pub mod history;
pub mod http;
pub mod mp4;
pub mod preflight;
pub mod proxy;
pub mod proxy_protocol;
pub mod reload;
pub mod rules;
pub mod server;
pub mod service;
pub mod stats;
pub mod tls;
pub mod txlog;
pub mod upgrade;
pub mod vcl;
pub mod vtc;
