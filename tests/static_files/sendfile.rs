//! Large files by `sendfile(2)`, whole and in ranges, and a file that shrinks or changes while
//! it is sent: the connection is closed, never a wrong byte sent as right.

use super::*;

/// A file truncated while it is sent: the client's connection is closed before the length
/// announced, never a complete-looking response of other bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_shrinks_while_sent_closes_the_connection() {
    let dir = site();
    let www = dir.0.join("www");
    let big = www.join("big.bin");
    // Sparse: 64 MiB that take no disk and read as zeros.
    let len: u64 = 64 << 20;
    std::fs::File::create(&big).unwrap().set_len(len).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut stream = connect_small_window(sh.addr).await;
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nX-Pass: 1\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.contains(&format!("content-length: {len}")), "{head}");
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(got < len, "a body of {got} bytes for a length of {len}");
    // Cleartext HTTP/1.1: the file went out by sendfile, which found it shorter.
    assert!(sh.stat("sendfile_bytes").await > 0, "not sent by sendfile");
}

/// Bytes that differ at every offset (a shifted or misplaced region shows).
fn patterned(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

/// Large files passed to a cleartext HTTP/1.1 client go out by sendfile(2): whole, one range,
/// several ranges (boundaries written between the regions), twice on one keep-alive
/// connection, and a small file after them; each body exactly the file's bytes, and
/// `sendfile_bytes` counts them. A cached copy is sent from memory, not by sendfile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_go_out_by_sendfile_whole_and_in_ranges() {
    let dir = site();
    let www = dir.0.join("www");
    let len = 9 << 20;
    let data = patterned(len);
    std::fs::write(www.join("large.bin"), &data).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut conn = Conn::open(sh.addr).await;
    let before = sh.stat("sendfile_bytes").await;
    let r = conn.send("GET", "/large.bin", &[PASS], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), len);
    assert!(r.body == data[..], "the body is not the file");
    assert_eq!(sh.stat("sendfile_bytes").await - before, len as u64);

    let r = conn
        .send(
            "GET",
            "/large.bin",
            &[PASS, ("range", "bytes=1000-5000999")],
            b"",
        )
        .await;
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 1000-5000999/{len}").as_str())
    );
    assert!(
        r.body == data[1000..5_001_000],
        "the range is not the file's"
    );

    let r = conn
        .send(
            "GET",
            "/large.bin",
            &[PASS, ("range", "bytes=10-100009,6000000-6099999")],
            b"",
        )
        .await;
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap().to_string();
    let boundary = ct.split("boundary=").nth(1).unwrap().to_string();
    let mut want = Vec::new();
    for (start, end) in [(10usize, 100_009usize), (6_000_000, 6_099_999)] {
        want.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {start}-{end}/{len}\r\n\r\n"
            )
            .as_bytes(),
        );
        want.extend_from_slice(&data[start..=end]);
    }
    want.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert!(
        r.body == want,
        "the multipart body is not the file's ranges"
    );

    // The connection goes on: a small file (read, not sent by sendfile) after them.
    let sent = sh.stat("sendfile_bytes").await;
    assert_eq!(sent - before, len as u64 + 5_000_000 + 200_000);
    let r = conn.send("GET", "/text.txt", &[PASS], b"").await;
    assert_eq!(r.text(), "0123456789abcdefghijklmnopqrstuvwxyz");
    assert_eq!(sh.stat("sendfile_bytes").await, sent);

    // Cached: filled from the file, then sent from the stored copy.
    for _ in 0..2 {
        let r = conn.send("GET", "/large.bin", &[], b"").await;
        assert!(r.body == data[..], "the cached body is not the file");
    }
    assert_eq!(sh.stat("sendfile_bytes").await, sent);
}

/// A file changed in place (same length, new modification time) while sendfile sends it: the
/// connection is closed before the last bytes, never a complete body of two versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_while_sent_by_sendfile_closes_the_connection() {
    let dir = site();
    let www = dir.0.join("www");
    let big = www.join("big.bin");
    let len: u64 = 64 << 20;
    std::fs::File::create(&big).unwrap().set_len(len).unwrap();
    let sh = files(&www, |_| {}).await;
    let mut stream = connect_small_window(sh.addr).await;
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nX-Pass: 1\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0u8; 1024];
    assert!(stream.read(&mut first).await.unwrap() > 0);
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(got < len, "a body of {got} bytes for a length of {len}");
    assert!(sh.stat("sendfile_bytes").await > 0, "not sent by sendfile");
}
