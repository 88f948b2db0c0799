"""Schedules as times.

Crontab's vocabulary, slots and fire times, their ``OnCalendar=`` form, and which fires are due.
"""

__all__: list[str] = []
