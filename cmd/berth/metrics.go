package main

import (
	"net"

	"github.com/hashicorp/go-hclog"
)

// listenMetrics binds --metrics: a TCP address on which the daemon serves
// GET /metrics alone. An address beyond loopback is allowed (Prometheus
// may scrape from another machine) but said, because the metrics name
// every job that holds something, and its owner, to whoever reaches it.
func listenMetrics(addr string, log hclog.Logger) (net.Listener, error) {
	// An IPv4 address is bound as such: "tcp" takes 0.0.0.0 for every
	// address, IPv6 too, and says [::].
	network := "tcp"
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
			network = "tcp4"
		}
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn("metrics are served beyond this machine: whoever reaches the address reads the jobs' names and owners", "address", a.String())
	}
	return l, nil
}
