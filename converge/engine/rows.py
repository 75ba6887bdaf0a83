"""Which row stands for a resource name: the one rule.

A resource is a series of rows (versions): a replacement is a new row with
``replaces`` pointing at the old one, which keeps existing until its
cleanup deletes it. Laying out a traversal, showing a stack and a unit of
work settling on a replacement all ask the same question — of a name's
rows, which one stands for it with respect to a template version? — and
answer it here, in this order:

1. a row made for that template version (a rollback re-uses the original;
   a resumed traversal re-uses the replacement it made itself);
2. a row not FAILED (Heat's: an update after a replacement that failed
   starts from the original, which is good, and keeps it when the
   update asks for what it is);
3. a row not replaced by another;
4. one that exists (not INIT);
5. the newest.
"""


def score(row, template_id):
    return (row.template_id == template_id, row.status != 'FAILED',
            row.replaced_by is None, row.action != 'INIT', row.id)


def current(rows, template_id, names=None):
    """name -> the row that stands for it (only `names`, if given)."""
    best = {}
    for row in rows:
        if names is not None and row.name not in names:
            continue
        s = score(row, template_id)
        if row.name not in best or s > best[row.name][0]:
            best[row.name] = (s, row)
    return {name: v[1] for name, v in best.items()}


def settle(row, template_id, get):
    """Follow `row`'s replacements while the rule prefers them (a
    replacement made for this same template by a superseded traversal is
    where the node now stands). ``get(id)`` reads a row."""
    while row.replaced_by:
        new = get(row.replaced_by)
        if new is None or new.template_id != template_id:  # rule 1
            break
        row = new
    return row
