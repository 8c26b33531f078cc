# Stand-in for tools/lib.mk: "builds" lib$(LIB).a in the subdirectory.
all: lib$(LIB).a

lib$(LIB).a:
	@echo "stand-in library $(LIB)" >$@
