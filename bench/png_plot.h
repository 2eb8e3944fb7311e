// A plot's SVG document (bench/svg_plot.h) rendered to PNG by librsvg and
// cairo (Debian's librsvg2-dev; configure fails without it): `mlk bench
// --plot FILE.png`. No rasteriser of mlk's own.
#pragma once

#include <string>

#include "base/status.h"

namespace mlk::bench {

// The PNG bytes of `svg` at its own width and height in pixels (its
// width/height attributes), on the document's own background.
// InvalidArgument when librsvg cannot read or draw the document (its message
// included), Internal when cairo cannot encode the picture.
Expected<std::string> svg_to_png(const std::string& svg);

}  // namespace mlk::bench
