# Stand-in for tools/prog.mk: "builds" the tool into tools/sbin/ (where upstream puts them),
# as a script that says what it is.
all: ../sbin/$(PROG)

../sbin/$(PROG):
	@mkdir -p ../sbin
	@printf '#!/bin/sh\necho "stand-in ff_$(PROG)"\n' >$@
	@chmod 0755 $@
