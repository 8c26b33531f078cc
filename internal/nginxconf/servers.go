package nginxconf

import (
	"fmt"
	"strings"
)

// Blocks whose contents are data (keys and values), not directives.
var dataBlocks = map[string]bool{"types": true, "map": true, "geo": true, "split_clients": true, "charset_map": true, "match": true}

// checkServers judges the listen and sendfile directives of an http, stream or mail block, and
// notes the listens that a second nginx could not share with this one.
func (p *Plan) checkServers(proto *Directive, shim Shim) {
	if proto.Name == "http" {
		p.checkSendfile(proto.Block)
	}
	// nginx takes a listen socket's options from one of the listen directives of that
	// address, so one reuseport per address is what is needed (a second one is an error).
	first := map[string]*Directive{}
	reuse := map[string]bool{}
	var order []string
	for _, srv := range proto.Block {
		if srv.Name != "server" || !srv.IsBlock {
			continue
		}
		listens := 0
		for _, d := range srv.Block {
			if d.Name != "listen" || len(d.Args) == 0 {
				continue
			}
			listens++
			key, ok := listenKey(d.Args)
			if !ok {
				p.exclusive(d)
				continue
			}
			if first[key] == nil {
				first[key] = d
				order = append(order, key)
			}
			reuse[key] = reuse[key] || hasArg(d.Args[1:], "reuseport")
		}
		if listens == 0 && proto.Name == "http" {
			p.exclusive(srv)
			if shim.Instances > 1 {
				p.refuse(srv, "a server without listen makes nginx listen on *:80 without reuseport: with %d F-Stack instances the workers of all but one segfault in a respawn loop and connections hashed to them are dropped; write \"listen 80 reuseport;\" in it", shim.Instances)
			}
		}
	}
	for _, key := range order {
		if reuse[key] {
			continue
		}
		d := first[key]
		p.exclusive(d)
		if shim.Instances > 1 {
			p.refuse(d, "no listen of %s has reuseport: with %d F-Stack instances the workers of all but one segfault in a respawn loop and the connections hashed to them are dropped; write \"%s reuseport;\" (once per address)", key, shim.Instances, d.String())
		}
	}
}

// exclusive notes a listen (or a server listening on the default) that a second nginx could
// not open beside this one: without reuseport on both sockets its bind() fails (EADDRINUSE),
// on F-Stack as on the kernel, and so does a second bind() of a unix socket's path.
func (p *Plan) exclusive(d *Directive) {
	p.Exclusive = append(p.Exclusive, fmt.Sprintf("%s: %q", d.Where(), d.String()))
}

// checkSendfile refuses "sendfile on" anywhere in http: the shim does not hook sendfile(), which
// then fails on an F-Stack socket (EBADF), and nginx answers 200 with an empty body.
func (p *Plan) checkSendfile(dirs []*Directive) {
	for _, d := range dirs {
		if d.Name == "sendfile" && len(d.Args) == 1 && strings.EqualFold(d.Args[0], "on") {
			p.refuse(d, "F-Stack's shim does not hook sendfile(), so static files go out as 200 with an empty body; write \"sendfile off;\"")
		}
		if d.IsBlock && !dataBlocks[d.Name] {
			p.checkSendfile(d.Block)
		}
	}
}

// checkEvents: the shim hooks epoll (and select only in one build mode) but not poll().
func (p *Plan) checkEvents(events *Directive) {
	if events == nil {
		return
	}
	multi := false
	for _, d := range events.Block {
		switch d.Name {
		case "use":
			if len(d.Args) == 1 && d.Args[0] != "epoll" {
				p.refuse(d, "F-Stack's shim serves its sockets to epoll only (poll() is not hooked, select() only in one build mode); write \"use epoll;\" or remove it (epoll is nginx's default on Linux)")
			}
		case "multi_accept":
			multi = len(d.Args) == 1 && d.Args[0] == "on"
		}
	}
	if !multi {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s: events block without \"multi_accept on;\": every accept() is a round trip through the shim; F-Stack's Nginx guide sets it (-g cannot, it belongs in events)", events.Where()))
	}
}

// listenKey is the address a listen directive binds, normalised the way nginx groups them;
// unix sockets stay in the kernel and need nothing.
func listenKey(args []string) (string, bool) {
	addr := args[0]
	if strings.HasPrefix(addr, "unix:") {
		return "", false
	}
	host, port := "*", "80"
	switch {
	case strings.HasPrefix(addr, "["):
		end := strings.Index(addr, "]")
		if end < 0 {
			return "", false
		}
		host = addr[:end+1]
		if rest := addr[end+1:]; strings.HasPrefix(rest, ":") {
			port = rest[1:]
		}
	case strings.Contains(addr, ":"):
		i := strings.LastIndex(addr, ":")
		host, port = addr[:i], addr[i+1:]
	case isDigits(addr):
		port = addr
	default:
		host = addr
	}
	if host == "0.0.0.0" {
		host = "*"
	}
	key := host + ":" + port
	if hasArg(args[1:], "udp") {
		key += " udp"
	}
	return key, true
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}
