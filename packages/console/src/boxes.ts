/** Labelled detection boxes drawn over an image or a video frame (Try it, Live). */

/** A box in coordinates normalised to the image (0..1). */
export interface Box {
  readonly ymin: number;
  readonly xmin: number;
  readonly ymax: number;
  readonly xmax: number;
}

export interface LabelledBox {
  readonly label?: string;
  readonly class_id: number;
  readonly score: number;
  readonly box: Box;
}

const BOX_COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];

/** Draws the boxes scoring at least `minScore` on a context showing a `width`×`height` image. */
export function drawBoxes(
  ctx: CanvasRenderingContext2D,
  width: number,
  height: number,
  detections: readonly LabelledBox[],
  minScore: number,
): void {
  ctx.lineWidth = Math.max(2, width / 300);
  ctx.font = `${Math.max(14, Math.round(width / 50))}px sans-serif`;
  detections
    .filter((d) => d.score >= minScore)
    .forEach((d, i) => {
      const color = BOX_COLORS[i % BOX_COLORS.length]!;
      const x = d.box.xmin * width;
      const y = d.box.ymin * height;
      const w = (d.box.xmax - d.box.xmin) * width;
      const hh = (d.box.ymax - d.box.ymin) * height;
      ctx.strokeStyle = color;
      ctx.strokeRect(x, y, w, hh);
      const text = `${d.label ?? d.class_id} ${(d.score * 100).toFixed(0)}%`;
      const tw = ctx.measureText(text).width + 6;
      const th = parseInt(ctx.font, 10) + 4;
      ctx.fillStyle = color;
      ctx.fillRect(x, Math.max(0, y - th), tw, th);
      ctx.fillStyle = '#ffffff';
      ctx.fillText(text, x + 3, Math.max(th - 4, y - 4));
    });
}
