package nginxconf

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// debianConf is Debian 12's nginx.conf (nginx 1.22, the app image of the local cluster) and its
// default site, comments included.
const debianConf = `user www-data;
worker_processes auto;
pid /run/nginx.pid;
include /etc/nginx/modules-enabled/*.conf;

events {
	worker_connections 768;
	# multi_accept on;
}

http {
	##
	# Basic Settings
	##

	sendfile on;
	tcp_nopush on;
	types_hash_max_size 2048;
	# server_tokens off;

	ssl_prefer_server_ciphers on;
	access_log /var/log/nginx/access.log;
	gzip on;

	server {
		listen 80 default_server;
		listen [::]:80 default_server;
		root /var/www/html;
		server_name _;
		location / {
			try_files $uri $uri/ =404;
		}
	}
}
`

// shimConf is what an Nginx under the shim should look like (docs/fstack-rules.md §6), with two servers
// on one port (reuseport once per address), quoting and a unix listener.
const shimConf = `user nobody nogroup;  # root is not needed (measured)
error_log stderr;
events {
	use epoll;
	multi_accept on;
	worker_connections 1024;
}
http {
	sendfile off;
	access_log off;
	log_format  main  '$remote_addr - "$request" { not a block }';
	server {
		listen 80 reuseport default_server;
		listen [::]:80 reuseport;
		location /static { sendfile off; }
	}
	server {
		listen 80;
		server_name "b.example;";
	}
	server {
		listen unix:/run/nginx-probe.sock;
	}
}
`

func check(t *testing.T, src string, shim Shim) *Plan {
	t.Helper()
	dirs, err := ParseString("nginx.conf", src)
	if err != nil {
		t.Fatal(err)
	}
	return Check(dirs, shim)
}

func TestDebianDefaultIsRefusedWithWhatToWrite(t *testing.T) {
	p := check(t, debianConf, Shim{Instances: 2, CPUs: []int{2, 3}})
	want := []string{
		`nginx.conf:2: "worker_processes auto": auto starts one worker per online CPU`,
		`nginx.conf:16: "sendfile on": F-Stack's shim does not hook sendfile(), so static files go out as 200 with an empty body; write "sendfile off;"`,
		`nginx.conf:26: "listen 80 default_server": no listen of *:80 has reuseport`,
		`nginx.conf:27: "listen [::]:80 default_server": no listen of [::]:80 has reuseport`,
	}
	if len(p.Refusals) != len(want) {
		t.Fatalf("refusals:\n%s", strings.Join(p.Refusals, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(p.Refusals[i], w) {
			t.Errorf("refusal %d:\n got %s\nwant prefix %s", i, p.Refusals[i], w)
		}
	}
	if !strings.Contains(p.Refusals[0], `write "worker_processes 2;"`) || !strings.Contains(p.Refusals[2], `write "listen 80 default_server reuseport;"`) {
		t.Errorf("the refusals do not say what to write:\n%s", strings.Join(p.Refusals, "\n"))
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "nginx.conf:6: events block without \"multi_accept on;\"") {
		t.Errorf("warnings: %q", p.Warnings)
	}
}

// With one instance reuseport is not needed (the local cluster's stack), sendfile still is; the
// listens without it are noted all the same, since a second nginx could not share them.
func TestOneInstanceNeedsNoReuseport(t *testing.T) {
	p := check(t, strings.Replace(strings.Replace(debianConf, "sendfile on", "sendfile off", 1), "worker_processes auto;", "", 1), Shim{Instances: 1, CPUs: []int{0}})
	if len(p.Refusals) != 0 {
		t.Fatalf("refusals: %q", p.Refusals)
	}
	if len(p.Exclusive) != 2 || !strings.Contains(p.Exclusive[0], `"listen 80 default_server"`) || !strings.Contains(p.Exclusive[1], `"listen [::]:80 default_server"`) {
		t.Fatalf("exclusive listens %q, want Debian's two", p.Exclusive)
	}
}

// The listens a second nginx could not open beside a running one: an address none of whose
// listens has reuseport, a unix socket, a server on the default *:80. One reuseport per address
// is enough, as nginx takes one listen's options for each.
func TestExclusiveListens(t *testing.T) {
	for _, c := range []struct {
		conf string
		want []string
	}{
		{"http { server { listen 80 reuseport; } server { listen 80; listen 8080 reuseport; } }", nil},
		{"http { server { listen 80; } }", []string{`nginx.conf:2: "listen 80"`}},
		{"http { server { listen 80 reuseport; listen unix:/run/a.sock; } }", []string{`nginx.conf:2: "listen unix:/run/a.sock"`}},
		{"http {\n server { server_name a; }\n}", []string{`nginx.conf:3: "server"`}},
		{"stream { server { listen 53 udp reuseport; } server { listen 54 udp; } }", []string{`nginx.conf:2: "listen 54 udp"`}},
	} {
		p := check(t, "events { multi_accept on; }\n"+c.conf+"\n", Shim{Instances: 1, CPUs: []int{0}})
		if !reflect.DeepEqual(p.Exclusive, c.want) {
			t.Errorf("%s: exclusive %q, want %q", c.conf, p.Exclusive, c.want)
		}
	}
}

func TestShimConfIsFixedUpFromTheCommandLine(t *testing.T) {
	p := check(t, shimConf, Shim{Instances: 2, CPUs: []int{2, 5}})
	if len(p.Refusals) != 0 || len(p.Warnings) != 0 {
		t.Fatalf("refusals %q, warnings %q", p.Refusals, p.Warnings)
	}
	want := []string{"worker_processes 2;", "worker_cpu_affinity 100 100000;", "daemon off;"}
	if !reflect.DeepEqual(p.Globals, want) || p.Workers != 2 {
		t.Fatalf("globals %q (workers %d), want %q", p.Globals, p.Workers, want)
	}
	if len(p.FixUps) != 3 || !strings.Contains(p.FixUps[1], "CPUs 2,5") {
		t.Fatalf("fix-ups are not logged with their reason: %q", p.FixUps)
	}
}

func TestWorkerSettings(t *testing.T) {
	for _, c := range []struct {
		main, refusal, warning string
		globals                []string
	}{
		{main: "worker_processes 1;", refusal: "1 workers for 2 F-Stack instances"},
		{main: "worker_processes 3;", warning: "instances serve unequal numbers", globals: []string{"worker_cpu_affinity 1 10 100;", "daemon off;"}},
		{main: "worker_processes 4; worker_cpu_affinity 0001 0010 0100 1000; daemon off;", globals: nil},
		{main: "worker_processes 4; worker_cpu_affinity auto; daemon off;", warning: "auto binds worker i to the node's i-th CPU"},
		{main: "worker_processes 100;", refusal: "need 51 shim contexts per F-Stack instance"},
		{main: "worker_processes two;", refusal: `not a number of workers; write "worker_processes 2;"`},
	} {
		p := check(t, c.main+"\nevents { multi_accept on; }\n", Shim{Instances: 2, CPUs: []int{0, 1, 2}})
		if c.refusal != "" && (len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0], c.refusal)) {
			t.Errorf("%s: refusals %q, want one with %q", c.main, p.Refusals, c.refusal)
		}
		if c.refusal == "" && len(p.Refusals) != 0 {
			t.Errorf("%s: refused: %q", c.main, p.Refusals)
		}
		if (c.warning == "") != (len(p.Warnings) == 0) || (c.warning != "" && !strings.Contains(p.Warnings[0], c.warning)) {
			t.Errorf("%s: warnings %q, want %q", c.main, p.Warnings, c.warning)
		}
		if c.refusal == "" && !reflect.DeepEqual(p.Globals, c.globals) {
			t.Errorf("%s: globals %q, want %q", c.main, p.Globals, c.globals)
		}
	}
}

func TestEventsAndServerWithoutListen(t *testing.T) {
	p := check(t, "events { use poll; }\nhttp {\n server { server_name a; }\n}\n", Shim{Instances: 2})
	if len(p.Refusals) != 2 || !strings.Contains(p.Refusals[0], `nginx.conf:3: "server": a server without listen`) ||
		!strings.Contains(p.Refusals[1], `nginx.conf:1: "use poll": F-Stack's shim serves its sockets to epoll only`) {
		t.Fatalf("refusals:\n%s", strings.Join(p.Refusals, "\n"))
	}
	p = check(t, "events { use select; }\nstream { server { listen 53 udp; } server { listen 53 udp reuseport; } }\n", Shim{Instances: 2})
	if len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0], "use select") {
		t.Fatalf("stream listen with one reuseport per address must pass, select must not:\n%s", strings.Join(p.Refusals, "\n"))
	}
}

func TestCommandLine(t *testing.T) {
	c, err := ParseCommand([]string{"/usr/sbin/nginx", "-p/srv", "-c", "conf/x.conf", "-qg", "daemon off;"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Prefix != "/srv" || c.Conf != "conf/x.conf" || c.Globals != "daemon off;" || c.NoServer != "" {
		t.Fatalf("parsed %+v", c)
	}
	if got := c.ConfFile(Build{Prefix: "/usr/share/nginx", ConfPath: "/etc/nginx/nginx.conf"}); got != "/srv/conf/x.conf" {
		t.Fatalf("conf file %s, want /srv/conf/x.conf (-c relative to -p)", got)
	}
	want := []string{"/usr/sbin/nginx", "-p/srv", "-c", "conf/x.conf", "-qg", "daemon off; worker_processes 2;"}
	if got := c.WithGlobals("worker_processes 2;"); !reflect.DeepEqual(got, want) {
		t.Fatalf("argv %q, want %q (nginx keeps only the last -g)", got, want)
	}
	c, _ = ParseCommand([]string{"nginx", "-gpid /x.pid;"})
	if got := c.WithGlobals("daemon off;"); got[1] != "-gpid /x.pid; daemon off;" {
		t.Fatalf("attached -g: %q", got)
	}
	for _, argv := range [][]string{{"nginx", "-t"}, {"nginx", "-c", "/x", "-T"}, {"nginx", "-s", "reload"}, {"nginx", "-qt"}, {"nginx", "-V"}} {
		if c, err := ParseCommand(argv); err != nil || c.NoServer == "" {
			t.Errorf("%q is not a server run: %+v %v", argv, c, err)
		}
	}
	if _, err := ParseCommand([]string{"nginx", "-x"}); err == nil {
		t.Error("an unknown option must be an error, as for nginx")
	}
}

func TestParseVersion(t *testing.T) {
	out := "nginx version: nginx/1.22.1\nconfigure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf --http-log-path=/var/log/nginx/access.log\n"
	if b := ParseVersion(out); b.Prefix != "/usr/share/nginx" || b.ConfPath != "/etc/nginx/nginx.conf" {
		t.Fatalf("Debian's build: %+v", b)
	}
	if b := ParseVersion("nginx version: nginx/1.25.0\nconfigure arguments: --with-http_ssl_module\n"); b != upstreamBuild {
		t.Fatalf("no --prefix: %+v, want nginx's own defaults", b)
	}
}

func TestPrepareReadsTheFileNginxWillUse(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"etc/nginx.conf": "include conf.d/*.conf;\nevents { multi_accept on; }\n", "etc/conf.d/w.conf": "worker_processes 2;\n"})
	build := func(context.Context, string) (Build, error) {
		return Build{Prefix: dir, ConfPath: filepath.Join(dir, "etc/nginx.conf")}, nil
	}
	p, err := Prepare(context.Background(), []string{"nginx", "-g", "daemon off;"}, Shim{Instances: 2, CPUs: []int{4, 6}}, build)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nginx", "-g", "daemon off; worker_cpu_affinity 10000 1000000;"}
	if p.ConfFile != filepath.Join(dir, "etc/nginx.conf") || !reflect.DeepEqual(p.Argv, want) {
		t.Fatalf("conf %s argv %q, want %q", p.ConfFile, p.Argv, want)
	}
	if p, err := Prepare(context.Background(), []string{"nginx", "-t"}, Shim{Instances: 2}, build); p != nil || err != nil {
		t.Fatalf("nginx -t must pass through: %+v %v", p, err)
	}
	broken := func(context.Context, string) (Build, error) { return Build{}, errors.New("no nginx") }
	if _, err := Prepare(context.Background(), []string{"nginx"}, Shim{Instances: 1}, broken); err == nil || !strings.Contains(err.Error(), "find the configuration file") {
		t.Fatalf("error %v", err)
	}
}

// The pid file `nginx -s reload` reads: the pid directive (relative to the prefix), else the
// compiled-in --pid-path (Debian's /run/nginx.pid), else nginx's logs/nginx.pid; pid off: none.
func TestPreparedPidFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.conf": "events {}\n", "b.conf": "pid run/x.pid;\nevents {}\n", "c.conf": "pid off;\nevents {}\n"})
	debian := func(context.Context, string) (Build, error) {
		return ParseVersion("configure arguments: --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf --pid-path=/run/nginx.pid\n"), nil
	}
	for _, c := range []struct {
		argv  []string
		build func(context.Context, string) (Build, error)
		want  string
	}{
		{[]string{"nginx", "-c", filepath.Join(dir, "a.conf")}, debian, "/run/nginx.pid"},
		{[]string{"nginx", "-p", dir, "-c", filepath.Join(dir, "b.conf")}, debian, filepath.Join(dir, "run/x.pid")},
		{[]string{"nginx", "-c", filepath.Join(dir, "a.conf"), "-g", "pid /tmp/g.pid;"}, debian, "/tmp/g.pid"},
		{[]string{"nginx", "-c", filepath.Join(dir, "c.conf")}, debian, ""},
		{[]string{"nginx", "-p", dir, "-c", filepath.Join(dir, "a.conf")}, func(context.Context, string) (Build, error) { return ParseVersion(""), nil }, filepath.Join(dir, "logs/nginx.pid")},
		{[]string{"nginx", "-c", filepath.Join(dir, "a.conf")}, func(context.Context, string) (Build, error) { return Build{}, errors.New("no nginx -V") }, ""},
	} {
		p, err := Prepare(context.Background(), c.argv, Shim{Instances: 1}, c.build)
		if err != nil || p.PidFile != c.want {
			t.Errorf("%q: pid file %q (%v), want %q", c.argv, p.PidFile, err, c.want)
		}
	}
}
