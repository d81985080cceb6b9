//! The listening sockets of the webhook and metrics servers.

use std::io;
use std::net::{Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// Pending connections the kernel queues per listener.
const BACKLOG: i32 = 1024;

/// A listen address named by a setting that cannot be bound: the agent stops at start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on --{setting} {addr}: {source}")]
pub struct BindError {
    /// The flag without its dashes (`metrics-addr`, `webhook-addr`).
    pub setting: &'static str,
    /// The address as configured.
    pub addr: SocketAddr,
    /// Why binding failed (`Address already in use`).
    #[source]
    pub source: io::Error,
}

/// Binds `addr`, the value of the setting `--{setting}`, and logs the address bound (with
/// port 0, the port the kernel chose), naming `server`.
pub fn bind_setting(
    setting: &'static str,
    addr: SocketAddr,
    server: &'static str,
) -> Result<TcpListener, BindError> {
    let error = |source| BindError {
        setting,
        addr,
        source,
    };
    let listener = bind(addr).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    tracing::info!(addr = %bound, setting, "{server} listening");
    Ok(listener)
}

/// Binds `addr`. An unspecified host (`0.0.0.0` or `::`, which is what `:port` means)
/// listens on every IPv4 and IPv6 address through one dual-stack socket (`IPV6_V6ONLY`
/// off); on a host without IPv6, `0.0.0.0` falls back to IPv4 only. A given address is
/// bound as it is. Must be called within the Tokio runtime.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    if addr.ip().is_unspecified() {
        match dual_stack(addr.port()) {
            Ok(l) => return Ok(l),
            Err(e) if addr.is_ipv4() => {
                tracing::info!(%addr, error = %e, "no IPv6 listener: IPv4 only");
            }
            Err(e) => return Err(e),
        }
    }
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    listen(socket, addr)
}

fn dual_stack(port: u16) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    listen(socket, SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
}

fn listen(socket: Socket, addr: SocketAddr) -> io::Result<TcpListener> {
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}
