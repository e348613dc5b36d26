# sfc-dpi: nDPI classifier fed by NFQUEUE (the `dpi` function).  Included by native/Makefile:
#   include dpi.mk      (adds build/sfc-dpi to NATIVE_TARGETS; `make -C native sfc-dpi`)
# or used on its own:  make -C native -f dpi.mk
# Including it does not change the including Makefile's default goal.
_dpi_saved_goal := $(.DEFAULT_GOAL)
DPI_BUILD   ?= build
DPI_CC      ?= $(or $(CC),cc)
DPI_CFLAGS  ?= -O2 -g -Wall -Wextra -Wno-unused-parameter -std=gnu11
DPI_LDLIBS  := -lndpi -lnetfilter_queue -lnfnetlink -lmnl -lpthread -lm

ifeq ($(V),1)
  DPI_Q :=
else
  DPI_Q := @
endif

NATIVE_TARGETS += $(DPI_BUILD)/sfc-dpi


.DELETE_ON_ERROR:
.PHONY: sfc-dpi clean-dpi

sfc-dpi: $(DPI_BUILD)/sfc-dpi

$(DPI_BUILD)/sfc-dpi.o: sfc-dpi.c dpi.mk
	$(DPI_Q)mkdir -p $(@D)
	$(if $(DPI_Q),@echo "  CC      $@")
	$(DPI_Q)$(DPI_CC) $(DPI_CFLAGS) -c $< -o $@

$(DPI_BUILD)/sfc-dpi: $(DPI_BUILD)/sfc-dpi.o
	$(if $(DPI_Q),@echo "  LD      $@")
	$(DPI_Q)$(DPI_CC) $(DPI_CFLAGS) $< -o $@ $(DPI_LDLIBS)

clean-dpi:
	$(DPI_Q)rm -f $(DPI_BUILD)/sfc-dpi $(DPI_BUILD)/sfc-dpi.o

ifneq ($(_dpi_saved_goal),)
.DEFAULT_GOAL := $(_dpi_saved_goal)
endif
