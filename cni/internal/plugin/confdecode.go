package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// decodeConf is json.Unmarshal(stdin, c), member by member. json.Unmarshal into NetConf first
// builds encoding/json's reflection description of its twenty fields (the embedded PluginConf
// included), a twentieth of a CNI call's CPU time, paid again by every call. Here each member's
// value is decoded straight into its field, with Unmarshal's rules: keys match a field's name
// exactly or else case-insensitively, a later duplicate wins, unknown members are skipped, and
// anything after the object is an error. A test holds the field list to NetConf's tags and the
// results to json.Unmarshal's.
func decodeConf(stdin []byte, c *NetConf) error {
	dec := json.NewDecoder(bytes.NewReader(stdin))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != nil { // null leaves the config as it is, as Unmarshal does
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return fmt.Errorf("json: cannot unmarshal %v into a network config object", tok)
		}
		if err := decodeMembers(dec, c.jsonFields()); err != nil {
			return err
		}
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return errors.New("json: invalid data after the top-level value")
}

func decodeMembers(dec *json.Decoder, fields []confField) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var dst any = new(json.RawMessage)
		if f := fieldFor(fields, key); f != nil {
			dst = f
		}
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	_, err := dec.Token() // the closing brace
	return err
}

type confField struct {
	name string
	dst  any
}

func fieldFor(fields []confField, key string) any {
	for _, f := range fields {
		if f.name == key {
			return f.dst
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.dst
		}
	}
	return nil
}

// jsonFields lists NetConf's members by their JSON names.
func (c *NetConf) jsonFields() []confField {
	return []confField{
		{"cniVersion", &c.CNIVersion}, {"name", &c.Name}, {"type", &c.Type}, {"capabilities", &c.Capabilities},
		{"ipam", &c.IPAM}, {"dns", &c.DNS}, {"prevResult", &c.RawPrevResult},
		{"cni.dev/valid-attachments", &c.ValidAttachments},
		{"bridge", &c.Bridge}, {"ovsdbSocket", &c.OVSDBSocket}, {"socketRoot", &c.SocketRoot},
		{"podSocketDir", &c.PodSocketDir}, {"deviceInfoDir", &c.DeviceInfoDir}, {"queues", &c.Queues},
		{"queueSize", &c.QueueSize}, {"mtu", &c.MTU}, {"mac", &c.MAC}, {"logFile", &c.LogFile},
		{"runtimeConfig", &c.RuntimeConfig},
	}
}
