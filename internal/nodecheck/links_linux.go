package nodecheck

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Rtnetlink attributes and the ethtool request read here (linux/if_link.h, linux/ethtool.h).
const (
	iflaLinkNetnsID = 37
	iflaInfoKind    = 1
	ethtoolGTxCsum  = 0x16
)

// KernelLinks lists the interfaces of the caller's network namespace with an rtnetlink dump and
// reads each one's tx checksum offload with the ethtool ioctl. Both are reads the kernel allows
// without any capability, so the node agent gains no power for them.
type KernelLinks struct{}

// Links implements Links.
func (KernelLinks) Links() ([]Link, error) {
	raw, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink link dump: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink link dump: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for the ethtool ioctl: %w", err)
	}
	defer unix.Close(fd)
	var out []Link
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		l, err := parseLink(m)
		if err != nil {
			return nil, err
		}
		l.TxChecksum, l.TxErr = txChecksum(fd, l.Name)
		out = append(out, l)
	}
	return out, nil
}

func parseLink(m *syscall.NetlinkMessage) (Link, error) {
	l := Link{Index: int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return l, fmt.Errorf("rtnetlink link %d: %w", l.Index, err)
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.IFLA_IFNAME:
			l.Name = cString(a.Value)
		case syscall.IFLA_LINK:
			if len(a.Value) >= 4 {
				l.PeerIndex = int(int32(binary.NativeEndian.Uint32(a.Value)))
			}
		case iflaLinkNetnsID:
			l.PeerElsewhere = true
		case syscall.IFLA_LINKINFO:
			l.Kind = cString(nestedAttr(a.Value, iflaInfoKind))
		}
	}
	return l, nil
}

// nestedAttr is the value of the first attribute of type typ in b (rtattr records, 4-aligned).
func nestedAttr(b []byte, typ uint16) []byte {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return nil
		}
		if binary.NativeEndian.Uint16(b[2:]) == typ {
			return b[4:n]
		}
		n = (n + 3) &^ 3
		if n > len(b) {
			return nil
		}
		b = b[n:]
	}
	return nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// txChecksum asks ETHTOOL_GTXCSUM: whether any of the device's checksum offload features is on.
func txChecksum(fd int, name string) (bool, error) {
	if len(name) >= unix.IFNAMSIZ {
		return false, fmt.Errorf("interface name %q too long", name)
	}
	value := struct{ cmd, data uint32 }{cmd: ethtoolGTxCsum}
	var req struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [24 - unsafe.Sizeof(uintptr(0))]byte // the rest of struct ifreq's union
	}
	copy(req.name[:], name)
	req.data = unsafe.Pointer(&value)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return false, fmt.Errorf("ethtool tx-checksumming of %s: %w", name, errno)
	}
	return value.data != 0, nil
}
