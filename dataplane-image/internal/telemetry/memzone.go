package telemetry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Memzone is one memzone as /eal/memzone_info describes it.
type Memzone struct {
	ID      int
	Name    string
	Length  uint64
	Address uint64 // the virtual address, the same in the primary and every secondary
}

// MaxArrayEntries is the most entries a DPDK telemetry array holds (RTE_TEL_MAX_ARRAY_ENTRIES,
// 512 in DPDK 23.11): /eal/memzone_list never lists more, whatever RTE_MAX_MEMZONE is.
const MaxArrayEntries = 512

// MemzoneList returns the ids of the primary's memzones (/eal/memzone_list). FindMemzones asks
// once per id, so a list longer than DPDK can send, or with an id twice or negative, is refused
// rather than walked.
func (c *Client) MemzoneList() ([]int, error) {
	v, err := c.Command("/eal/memzone_list")
	if err != nil {
		return nil, err
	}
	var ids []int
	if err := json.Unmarshal(v, &ids); err != nil {
		return nil, fmt.Errorf("telemetry /eal/memzone_list: %.200s: %w", v, err)
	}
	if len(ids) > MaxArrayEntries {
		return nil, fmt.Errorf("telemetry /eal/memzone_list lists %d memzones, more than a DPDK telemetry array holds (%d): refused", len(ids), MaxArrayEntries)
	}
	seen := make(map[int]bool, len(ids))
	for _, id := range ids {
		if id < 0 || seen[id] {
			return nil, fmt.Errorf("telemetry /eal/memzone_list: id %d is negative or listed twice: refused", id)
		}
		seen[id] = true
	}
	return ids, nil
}

// MemzoneInfo describes memzone id (/eal/memzone_info,<id>).
func (c *Client) MemzoneInfo(id int) (*Memzone, error) {
	cmd := "/eal/memzone_info," + strconv.Itoa(id)
	v, err := c.Command(cmd)
	if err != nil {
		return nil, err
	}
	var info struct {
		Name    string `json:"Name"`
		Length  uint64 `json:"Length"`
		Address string `json:"Address"`
	}
	if err := json.Unmarshal(v, &info); err != nil {
		return nil, fmt.Errorf("telemetry %s: %.200s: %w", cmd, v, err)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(info.Address, "0x"), 16, 64)
	if err != nil || addr == 0 {
		return nil, fmt.Errorf("telemetry %s: address %q is not a pointer", cmd, info.Address)
	}
	return &Memzone{ID: id, Name: info.Name, Length: info.Length, Address: addr}, nil
}

// FindMemzones looks up the memzones named in names and returns those found, by name.
func (c *Client) FindMemzones(names ...string) (map[string]*Memzone, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	ids, err := c.MemzoneList()
	if err != nil {
		return nil, err
	}
	found := map[string]*Memzone{}
	for _, id := range ids {
		mz, err := c.MemzoneInfo(id)
		if err != nil {
			return nil, err
		}
		if want[mz.Name] {
			found[mz.Name] = mz
			if len(found) == len(want) {
				break
			}
		}
	}
	return found, nil
}
