"""Mail text helpers (parsers/mail.py): HTML → text, quoted replies, signatures, SafeLinks, MIME decoding."""

from __future__ import annotations

import pytest

from rag_pipelines.parsers.mail import (MailRecord, calendar_text, clean_body, decode_header_value, decode_part,
                                        decode_safelinks, format_address, html_to_text, is_forward, mail_document,
                                        message_bodies, normalise_message_id, strip_quoted, strip_signature)

SAFE = ("https://nam12.safelinks.protection.outlook.com/?url=https%3A%2F%2Fexample.org%2Fdocs%3Fa%3D1%26b%3D2"
        "&data=05%7C01%7Cx%40y.com&sdata=abc%3D&reserved=0")


@pytest.mark.parametrize("text", [
    "Sounds good.\n\nOn Tue, Mar 3, 2026 at 10:00 AM Ann Lee <ann@example.com> wrote:\nOriginal text",
    "Sounds good.\n\nOn Tue, Mar 3, 2026 at 10:00 AM Ann Lee <\nann@example.com> wrote:\n\nOriginal text",  # wrapped
    "Sounds good.\n\nOn 3 Mar 2026, at 10:00, Ann Lee <ann@example.com> wrote:\n\nOriginal text",  # Apple Mail
    "Sounds good.\n\nAm 04.03.2026 um 09:15 schrieb Jürgen Müller <j@beispiel.de>:\n\nOriginal text",
    "Sounds good.\n\nJürgen Müller <j@beispiel.de> schrieb am Mi., 4. März 2026, 09:15:\n\nOriginal text",
    "Sounds good.\n\nLe mar. 3 mars 2026 à 10:00, Ann Lee <ann@example.com> a écrit\u00a0:\nOriginal text",
    "Sounds good.\n\nEl mar, 3 mar 2026 a las 10:00, Ann <ann@example.com> escribió:\nOriginal text",
    "Sounds good.\n\n-----Original Message-----\nFrom: Ann\nSent: Monday\nOriginal text",
    "Sounds good.\n\n-----Ursprüngliche Nachricht-----\nVon: Ann\nGesendet: Montag\nOriginal text",
    "Sounds good.\n\n----- Message d'origine -----\nDe : Ann\nOriginal text",
    "Sounds good.\n\n________________________________\nFrom: Ann Lee <ann@example.com>\nSent: Monday, March 2, 2026\n"
    "To: Bob\nSubject: Budget\n\nOriginal text",
    "Sounds good.\n\nVon: Ann Lee <ann@example.com>\nGesendet: Montag, 2. März 2026 10:00\nAn: Bob\nBetreff: Budget\n\n"
    "Original text",
    "Sounds good.\n\nDe : Ann Lee\nEnvoyé : lundi 2 mars 2026 10:00\nÀ : Bob\nObjet : Budget\n\nOriginal text",
    "Sounds good.\n\n2026年3月3日 10:00 Ann Lee <ann@example.com> さんは書きました:\nOriginal text",
])
def test_top_posted_originals_are_cut(text):
    assert strip_quoted(text) == "Sounds good."


def test_bottom_and_inline_replies_keep_the_answers():
    text = ("On Tue, Mar 3, 2026 at 10:00 AM Ann <ann@example.com> wrote:\n> Can we meet Thursday?\n> And Friday?\n\n"
            "Thursday works.\n\n> What about the budget?\n\nApproved.")
    assert strip_quoted(text) == "Thursday works.\n\n\nApproved."


def test_sentences_that_look_like_headers_stay():
    text = ("On Monday, the team wrote: we ship on time.\nOn Monday, Bob wrote:\nthe plan is fine.\n"
            "From: Berlin\nDate: 3 March\nTo: Paris by train.")
    assert strip_quoted(text) == text  # no date/address in the attribution, no Subject: in the 'block'


def test_a_reply_that_is_only_a_quote_is_kept():
    assert strip_quoted("> just a quote\n> nothing else") == "> just a quote\n> nothing else"


@pytest.mark.parametrize("text, expected", [
    ("See you there.\n\n-- \nBob Stone\nACME Corp.\n+1 555 0100", "See you there."),
    ("See you there.\n\nSent from my iPhone", "See you there."),
    ("Bis dann.\n\nVon meinem iPhone gesendet", "Bis dann."),
    ("Thanks for the update, I'll check.\n\nBest regards,\nAnn Lee\nHead of Ops\n+49 30 1234",
     "Thanks for the update, I'll check."),
    ("Passt.\n\nMit freundlichen Grüßen\nJürgen Müller\nBeispiel GmbH", "Passt."),
    ("Parfait.\n\nCordialement,\nÉlodie", "Parfait."),
    ("Looks fine.\n\nThanks, Ann", "Looks fine."),
    ("Looks fine.\n\nThanks, that works for me", "Looks fine.\n\nThanks, that works for me"),  # a sentence
    ("Thanks!\nI will look at it tomorrow and send the numbers.", "Thanks!\nI will look at it tomorrow and send the numbers."),
    ("Cheers,\nAnn", "Cheers,\nAnn"),  # nothing but a sign-off: kept
])
def test_signatures(text, expected):
    assert strip_signature(text) == expected


def test_safelinks_are_decoded_in_text_and_brackets():
    text = f"Docs: {SAFE} and <{SAFE}>. Other: https://example.com/x?url=y"
    assert decode_safelinks(text) == ("Docs: https://example.org/docs?a=1&b=2 and <https://example.org/docs?a=1&b=2>. "
                                      "Other: https://example.com/x?url=y")
    assert decode_safelinks(SAFE.replace("&", "&amp;")) == "https://example.org/docs?a=1&b=2"


def test_html_to_text_drops_quotes_signatures_and_scripts():
    html = ("<html><head><title>t</title><style>p{}</style></head><body><div>Top&nbsp;reply<br>line&#8203;2</div>"
            "<table><tr><td>a</td><td>b</td></tr></table><script>x()</script>"
            "<div class='gmail_signature'>Sig</div><div class='gmail_quote'><div class='gmail_attr'>On Tue, Ann wrote:"
            "</div><blockquote>old</blockquote></div></body></html>")
    assert html_to_text(html) == "Top reply\nline2\n\na b"
    assert "old" in html_to_text(html, strip_quotes=False)


def test_outlook_html_original_is_cut_even_when_nested():
    html = ("<div><p>New text</p><div><div id='divRplyFwdMsg'><b>From:</b> X</div></div></div>"
            "<div><p>Old text</p></div>")
    assert html_to_text(html) == "New text"


def test_forwards_keep_their_content():
    body = "FYI\n\n---------- Forwarded message ---------\nFrom: Ann <ann@example.com>\nDate: Mon\nSubject: x\n\nThe facts."
    assert is_forward("Fwd: x") and is_forward("WG: Angebot") and not is_forward("Re: Fwd: x")
    assert "The facts." in clean_body(body, forwarded=True)


def test_mime_decoding():
    latin = "café crème".encode("iso-8859-1")
    assert decode_part(latin, "text/plain; charset=ISO-8859-1") == "café crème"
    assert decode_part(latin, "text/plain") == "café crème"  # not UTF-8: cp1252 guess
    assert decode_part(b"caf=C3=A9 cr=C3=A8me=\n!", "text/plain; charset=utf-8", 5) == "café crème!"
    assert decode_part(b"Y2Fmw6kgY3LDqG1lIGJyw7tsw6llIQ==", 'text/plain; charset="utf-8"', "base64") == "café crème brûlée!"
    assert decode_part(b"already decoded, base64 declared", "text/plain", 4) == "already decoded, base64 declared"
    assert decode_part("x", None) == "x" and decode_part(None) == ""
    assert decode_header_value("=?utf-8?q?Gr=C3=BC=C3=9Fe?= aus Berlin") == "Grüße aus Berlin"
    raw = (b"Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
           b"caf=E9\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>caf&eacute;</p>\r\n--b--\r\n")
    assert message_bodies(raw) == ("café", "<p>caf&eacute;</p>")


def test_ids_addresses_and_calendar():
    assert normalise_message_id(" <a.b@x.com>\r\n ") == "a.b@x.com" == normalise_message_id("a.b@x.com")
    assert normalise_message_id("<>") == "" == normalise_message_id(None)
    assert format_address("Ann Lee", "Ann@Example.COM") == "Ann Lee <ann@example.com>"
    assert format_address("ann@example.com", "ANN@example.com") == "ann@example.com"
    assert format_address(None, "x@y.z") == "x@y.z" and format_address("Only Name", "") == "Only Name"
    ics = "BEGIN:VEVENT\r\nSUMMARY:Review\r\nDTSTART:20260310T100000Z\r\nLOCATION:Room 1\\, 2nd fl\r\nEND:VEVENT"
    assert calendar_text(ics) == "Review\nWhen: 2026-03-10 10:00\nWhere: Room 1, 2nd fl"


def test_mail_document():
    mail = MailRecord(subject="Re:  Budget", body=f"<p>Approved, see {SAFE}</p><blockquote type='cite'>old</blockquote>",
                      html=True, ts=1, sender="Ann Lee <ann@example.com>", to=("Bob <bob@example.com>",),
                      cc=("ann@example.com",), message_id="m@x", folders=("INBOX",), extra=(("body", "fti"),))
    doc = mail_document(mail)
    assert doc.title == "Re: Budget" and doc.author == "Ann Lee <ann@example.com>" and doc.ts == 1
    assert doc.sections[0].text == "Approved, see https://example.org/docs?a=1&b=2"
    assert doc.participants == ("Ann Lee <ann@example.com>", "Bob <bob@example.com>", "ann@example.com")
    assert doc.metadata == {"message_id": "m@x", "folders": ["INBOX"], "to": ["Bob <bob@example.com>"],
                            "cc": ["ann@example.com"], "body": "fti"}
    empty = mail_document(MailRecord(subject="", body="  "))
    assert empty.title == "(no subject)" and empty.sections == ()
