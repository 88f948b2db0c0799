"""The frame both commands share: what ``ghostjournal`` and ``ghostrunner`` print and write, and how.

Its faces: terminal text and tables (:mod:`.render`), typed time input (:mod:`.timeinput`),
output files written durably and never over what they must not replace (:mod:`.outfile`), the
self-contained HTML page (:mod:`.htmlpage`), the loopback test (:mod:`.loopback`), the check of a URL's
address (:mod:`.urls`) and where a journal is when no root is given (:mod:`.roots`); the click kit
both command groups are built on is :mod:`journal.frame.clikit`, imported by name so that the
rest of the frame does not import click.
"""

from journal.frame.htmlpage import content_security_policy, embed_json, first_line, page, page_title, text
from journal.frame.loopback import is_loopback_host, is_loopback_url
from journal.frame.outfile import (
    STDOUT,
    STOP_SIGNALS,
    HeldStops,
    OutputKind,
    claim_partial_directory,
    dangling_link_fix,
    hold_stops,
    refuse_inside_journals,
    release_stops,
    replace_durably,
    streamed_output,
    write_output,
)
from journal.frame.render import clip, counted, labelled, short_times, table, table_or_records, text_width
from journal.frame.roots import ROOT_ENVVAR, STATE_SUBDIRECTORY, JournalPlace, PlaceError, journal_place, state_home
from journal.frame.timeinput import TIME_FORMS, local_zone, parse_time_input, zone_name
from journal.frame.urls import UrlAddress, check_url_address, url_authority
from journal.terminal import printable

__all__ = [
    "ROOT_ENVVAR",
    "STATE_SUBDIRECTORY",
    "STDOUT",
    "STOP_SIGNALS",
    "TIME_FORMS",
    "HeldStops",
    "JournalPlace",
    "OutputKind",
    "PlaceError",
    "UrlAddress",
    "check_url_address",
    "claim_partial_directory",
    "clip",
    "content_security_policy",
    "counted",
    "dangling_link_fix",
    "embed_json",
    "first_line",
    "hold_stops",
    "is_loopback_host",
    "is_loopback_url",
    "journal_place",
    "labelled",
    "local_zone",
    "page",
    "page_title",
    "parse_time_input",
    "printable",
    "refuse_inside_journals",
    "release_stops",
    "replace_durably",
    "short_times",
    "state_home",
    "streamed_output",
    "table",
    "table_or_records",
    "text",
    "text_width",
    "url_authority",
    "write_output",
    "zone_name",
]
