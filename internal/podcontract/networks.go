package podcontract

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// NetworksAnnotation is Multus's pod annotation that selects the pod's additional networks. The
// injector adds an entry per stack port that names a network (Multus then calls the network's
// plugin, fstack-cni for a vhost-user network, with the entry's ips, mac and cni-args); the
// pod's own entries stay as it wrote them. Multus owns the format; NetworkEntry is what
// kube-fstack writes and reads of it.
const NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// NetworkEntry is one entry of NetworksAnnotation: the fields of Multus's network selection
// element kube-fstack writes (for a port) or reads (of an entry the pod already has).
type NetworkEntry struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Interface string `json:"interface"`
	// IPs and MAC reach the network's CNI plugin as runtimeConfig (the "ips" and "mac"
	// capabilities), so it reports, and the pod's network-status shows, what the dataplane serves.
	IPs []string `json:"ips,omitempty"`
	MAC string   `json:"mac,omitempty"`
	// CNIArgs carries the port's binding (CNIArgsBinding) to fstack-cni, which Multus hands over
	// as args.cni of the network's config.
	CNIArgs map[string]PortBinding `json:"cni-args,omitempty"`
	// Raw is the entry as it stands in the annotation: a pod's own entry is kept byte for byte,
	// fields kube-fstack does not read included.
	Raw json.RawMessage `json:"-"`
}

// Encoded is e with Raw set to its JSON, for an entry kube-fstack writes.
func (e NetworkEntry) Encoded() NetworkEntry {
	e.Raw, _ = json.Marshal(e)
	return e
}

// FormatNetworks is the NetworksAnnotation value of entries (each as its Raw), a JSON list.
func FormatNetworks(entries []NetworkEntry) string {
	out := make([]json.RawMessage, len(entries))
	for i := range entries {
		out[i] = entries[i].Raw
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// ParseNetworks reads a NetworksAnnotation value the way Multus does: JSON when it holds any of
// [ { ", else comma-separated <namespace>/<name>@<interface>. An entry without an interface gets
// the name Multus gives it, net<position>. The value is the pod's to write, bounded only by the
// API server's PodAnnotationLimit.
func ParseNetworks(raw string) ([]NetworkEntry, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var entries []NetworkEntry
	var err error
	if strings.ContainsAny(raw, `[{"`) {
		entries, err = parseNetworksJSON(raw)
	} else {
		entries, err = parseNetworksShort(raw)
	}
	if err != nil {
		return nil, err
	}
	for i := range entries {
		if entries[i].Interface == "" {
			entries[i].Interface = "net" + strconv.Itoa(i+1)
		}
	}
	return entries, nil
}

func parseNetworksJSON(raw string) ([]NetworkEntry, error) {
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf("not a JSON list: %w", err)
	}
	entries := make([]NetworkEntry, 0, len(list))
	for i, r := range list {
		var e NetworkEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		e.Raw = r
		entries = append(entries, e)
	}
	return entries, nil
}

func parseNetworksShort(raw string) ([]NetworkEntry, error) {
	var entries []NetworkEntry
	for i, item := range strings.Split(raw, ",") {
		e, err := parseNetworkItem(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

var reNetworkLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// parseNetworkItem reads <namespace>/<name>@<interface> (namespace and interface optional) into
// the JSON entry Multus would make of it.
func parseNetworkItem(item string) (NetworkEntry, error) {
	var e NetworkEntry
	rest := item
	if ns, name, ok := strings.Cut(item, "/"); ok {
		e.Namespace, rest = strings.TrimSpace(ns), name
	}
	name, iface, _ := strings.Cut(rest, "@")
	e.Name, e.Interface = strings.TrimSpace(name), strings.TrimSpace(iface)
	switch {
	case !reNetworkLabel.MatchString(e.Name):
		return e, fmt.Errorf("network name %q is not a DNS-1123 label", Printable(Clip(e.Name, 128)))
	case e.Namespace != "" && !reNetworkLabel.MatchString(e.Namespace):
		return e, fmt.Errorf("namespace %q is not a DNS-1123 label", Printable(Clip(e.Namespace, 128)))
	case strings.ContainsAny(e.Interface, "/@ \t") || len(e.Interface) > 15:
		return e, fmt.Errorf("interface %q is not an interface name (at most 15 characters, no /, @ or spaces)", Printable(Clip(e.Interface, 128)))
	}
	e.Raw, _ = json.Marshal(struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Interface string `json:"interface,omitempty"`
	}{e.Name, e.Namespace, e.Interface})
	return e, nil
}
