"""A strict reader of PNG files for the tests of pictures mlk makes (the
dashboard's screenshots, `mlk bench --plot FILE.png`): the signature, every
chunk's CRC, IHDR, and the pixels of 8-bit RGB or RGBA images decoded
(zlib, the five row filters), so that a test can say the picture is not
blank. Standard library only."""
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PngError(Exception):
    pass


def chunks(data):
    """[(type, payload)] of a PNG file's bytes; PngError when it is none."""
    if data[:8] != SIGNATURE:
        raise PngError("no PNG signature")
    out, at = [], 8
    while at < len(data):
        if at + 8 > len(data):
            raise PngError(f"truncated chunk header at byte {at}")
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if len(body) != n or at + 12 + n > len(data):
            raise PngError(f"truncated {kind!r} chunk at byte {at}")
        (crc,) = struct.unpack(">I", data[at + 8 + n:at + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise PngError(f"bad CRC of the {kind!r} chunk at byte {at}")
        out.append((kind, body))
        at += 12 + n
    if not out or out[0][0] != b"IHDR" or out[-1][0] != b"IEND":
        raise PngError("IHDR is not first or IEND not last")
    return out


def header(data):
    """(width, height, bit depth, colour type) from IHDR."""
    body = chunks(data)[0][1]
    w, h, depth, colour = struct.unpack(">IIBB", body[:10])
    return w, h, depth, colour


def pixels(data):
    """(width, height, rows): rows of (r, g, b, a) tuples; 8-bit RGB (2) and RGBA (6) only."""
    cs = chunks(data)
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", cs[0][1])
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise PngError(f"not an 8-bit non-interlaced RGB(A) image (depth {depth}, colour type {colour})")
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(b"".join(b for k, b in cs if k == b"IDAT"))
    stride = w * bpp
    if len(raw) != h * (stride + 1):
        raise PngError(f"IDAT holds {len(raw)} bytes, not {h * (stride + 1)}")
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                raise PngError(f"row {y}: unknown filter {f}")
        rows.append([tuple(line[x * bpp:x * bpp + bpp]) + ((255,) if bpp == 3 else ())
                     for x in range(w)])
        prev = line
    return w, h, rows


def colour_counts(rows):
    """{(r, g, b, a): count}."""
    counts = {}
    for row in rows:
        for p in row:
            counts[p] = counts.get(p, 0) + 1
    return counts
