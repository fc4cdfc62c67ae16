//! Tests of [`TlsStream`] against rustls' own client (tokio-rustls, the buffered API) over an
//! in-memory duplex pipe, in TLS 1.3 and 1.2.

use super::*;
use proptest::prelude::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

type Client = tokio_rustls::client::TlsStream<DuplexStream>;
type Server = TlsStream<DuplexStream>;

/// A server config and a client config trusting it, for `localhost`, in one TLS version.
fn configs(tls12: bool) -> (Arc<ServerConfig>, Arc<rustls::ClientConfig>) {
    let version = if tls12 {
        &rustls::version::TLS12
    } else {
        &rustls::version::TLS13
    };
    let (server, client) = crate::http::listener::tests::configs(&[version]);
    (Arc::new(server), Arc::new(client))
}

/// A client and a server that completed their handshake over a duplex pipe.
async fn pair(tls12: bool) -> (Client, Server) {
    let (server_config, client_config) = configs(tls12);
    let (c, s) = tokio::io::duplex(64 * 1024);
    let connector = tokio_rustls::TlsConnector::from(client_config);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let client = tokio::spawn(async move { connector.connect(name, c).await.unwrap() });
    let mut server = TlsStream::new(s, server_config).unwrap();
    server.read_client_hello().await.unwrap();
    server.handshake().await.unwrap();
    (client.await.unwrap(), server)
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The client sends `data` in writes of `chunk` bytes; the server echoes whatever it reads; the
/// client gets `data` back, byte for byte.
async fn echo(tls12: bool, data: Vec<u8>, chunk: usize) {
    let (client, mut server) = pair(tls12).await;
    let echo = tokio::spawn(async move {
        let mut b = vec![0u8; 1500];
        loop {
            match server.read(&mut b).await {
                Ok(0) => break,
                Ok(n) => server.write_all(&b[..n]).await.unwrap(),
                Err(e) => panic!("server read: {e}"),
            }
            server.flush().await.unwrap();
        }
        server.shutdown().await.unwrap();
    });
    let (mut rd, mut wr) = tokio::io::split(client);
    let expected = data.clone();
    let writer = tokio::spawn(async move {
        for piece in data.chunks(chunk.max(1)) {
            wr.write_all(piece).await.unwrap();
        }
        wr.flush().await.unwrap();
        wr.shutdown().await.unwrap();
    });
    let mut got = Vec::new();
    rd.read_to_end(&mut got).await.unwrap();
    writer.await.unwrap();
    echo.await.unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "the echo differs from what was sent");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn what_the_client_sends_comes_back_whole_in_any_split(
        tls12 in any::<bool>(),
        data in proptest::collection::vec(any::<u8>(), 0..70_000),
        chunk in 1usize..20_000,
    ) {
        run(echo(tls12, data, chunk));
    }

    /// Whatever arrives instead of a ClientHello ends in an error or end of file, not a panic.
    #[test]
    fn garbage_instead_of_a_handshake_is_an_error(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        record_header in any::<bool>(),
    ) {
        run(async move {
            let (server_config, _) = configs(false);
            let (mut c, s) = tokio::io::duplex(16 * 1024);
            let mut sent = Vec::new();
            if record_header {
                // A handshake record header that announces the garbage as its body.
                sent.extend_from_slice(&[0x16, 0x03, 0x01]);
                sent.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            }
            sent.extend_from_slice(&bytes);
            c.write_all(&sent).await.unwrap();
            drop(c);
            let mut server = TlsStream::new(s, server_config).unwrap();
            let result = async {
                server.read_client_hello().await?;
                server.handshake().await
            };
            assert!(result.await.is_err());
        });
    }
}

#[tokio::test]
async fn a_large_write_from_the_server_arrives_whole() {
    for tls12 in [false, true] {
        let (mut client, mut server) = pair(tls12).await;
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let writer = tokio::spawn(async move {
            server.write_all(&data).await.unwrap();
            server.shutdown().await.unwrap();
            server
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert!(got == expected, "TLS {}", if tls12 { "1.2" } else { "1.3" });
    }
}

/// The point of this stream (ADR 0032): between two messages a connection holds no buffer.
#[tokio::test]
async fn an_idle_connection_holds_no_buffer() {
    for tls12 in [false, true] {
        let (mut client, mut server) = pair(tls12).await;
        client.write_all(b"heartbeat").await.unwrap();
        let mut b = [0u8; 9];
        server.read_exact(&mut b).await.unwrap();
        server.write_all(b"ack").await.unwrap();
        server.flush().await.unwrap();
        let mut a = [0u8; 3];
        client.read_exact(&mut a).await.unwrap();
        assert_eq!(&a, b"ack");
        // Nothing more comes: the server's read waits, and while it waits it holds nothing.
        let waited = tokio::time::timeout(Duration::from_millis(20), server.read(&mut b)).await;
        assert!(waited.is_err(), "nothing was sent, so the read must wait");
        assert_eq!(server.buffered_bytes(), 0);
        // A record split across two reads waits in `incoming` and is read whole after.
        client.write_all(b"again").await.unwrap();
        client.flush().await.unwrap();
        let mut c = [0u8; 5];
        server.read_exact(&mut c).await.unwrap();
        assert_eq!(&c, b"again");
    }
}

#[tokio::test]
async fn a_key_update_from_the_client_keeps_the_connection_working() {
    let (mut client, mut server) = pair(false).await;
    for round in 0..3u8 {
        client.get_mut().1.refresh_traffic_keys().unwrap();
        client.write_all(&[round; 100]).await.unwrap();
        client.flush().await.unwrap();
        let mut b = [0u8; 100];
        server.read_exact(&mut b).await.unwrap();
        assert_eq!(b, [round; 100]);
        server.write_all(&[round + 10; 50]).await.unwrap();
        server.flush().await.unwrap();
        let mut r = [0u8; 50];
        client.read_exact(&mut r).await.unwrap();
        assert_eq!(r, [round + 10; 50]);
    }
}

#[tokio::test]
async fn close_notify_is_end_of_file_and_a_bare_close_is_an_error() {
    let (mut client, mut server) = pair(false).await;
    client.write_all(b"last").await.unwrap();
    client.shutdown().await.unwrap();
    let mut got = Vec::new();
    server.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"last");

    let (client, mut server) = pair(false).await;
    let (io, _) = client.into_inner();
    drop(io);
    let mut b = [0u8; 8];
    let e = server.read(&mut b).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
}
