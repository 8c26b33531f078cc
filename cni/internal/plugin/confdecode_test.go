package plugin

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jsonNames lists the JSON member names encoding/json would decode into t, embedded structs
// flattened.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		switch {
		case tag == "-" || !f.IsExported():
		case f.Anonymous && tag == "":
			names = append(names, jsonNames(f.Type)...)
		case tag == "":
			names = append(names, f.Name)
		default:
			names = append(names, tag)
		}
	}
	return names
}

func TestDecodeConfCoversEveryField(t *testing.T) {
	var got []string
	for _, f := range (&NetConf{}).jsonFields() {
		got = append(got, f.name)
	}
	want := jsonNames(reflect.TypeFor[NetConf]())
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("decodeConf knows %v, NetConf has %v", got, want)
	}
}

// decodeConf and json.Unmarshal agree on what they accept and on what they produce.
func TestDecodeConfMatchesUnmarshal(t *testing.T) {
	inputs := []string{
		`{"cniVersion":"1.1.0","name":"n","type":"fstack-cni","bridge":"br0","mtu":9000,"queues":2,"queueSize":512}`,
		`{"name":"n","ipam":{"type":"host-local","subnet":"10.1.0.0/16"},"dns":{"nameservers":["1.1.1.1"]},
		  "capabilities":{"mac":true},"runtimeConfig":{"mac":"02:00:00:00:00:01","CNIDeviceInfoFile":"/x"},
		  "prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0"}]},"unknown":{"a":[1,{"b":null}]},
		  "cni.dev/valid-attachments":[{"containerID":"c","ifname":"net1"}],"logFile":"/l","mac":"02:00:00:00:00:02",
		  "ovsdbSocket":"/o","socketRoot":"/s","podSocketDir":"/p","deviceInfoDir":"/d"}`,
		`{"Bridge":"upper","MTU":1400,"bridge":"lower","mtu":1500}`,
		`{"mtu":1500,"MTU":1400}`,
		`{"bridge":null,"mtu":null,"ipam":null,"prevResult":null}`,
		`{"prevResult":{"a":1},"prevResult":{"b":2}}`,
		`{}`, `null`, ` {"name":"n"} `,
		`{"mtu":"1500"}`, `{"name":5}`, `{"ipam":"x"}`, `[]`, `"x"`, `{"name":"n"} x`, `{"name":"n"}{}`, `{"name":`, `{"a" 1}`, ``,
	}
	for _, in := range inputs {
		var got, want NetConf
		gotErr, wantErr := decodeConf([]byte(in), &got), json.Unmarshal([]byte(in), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: decodeConf error %v, Unmarshal error %v", in, gotErr, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ndecodeConf %+v\nUnmarshal  %+v", in, got, want)
		}
	}
}
